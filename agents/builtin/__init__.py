"""kiln's built-in offline policies (`--llm builtin`): a Triton template Coder, a rule-based
Judge and a shape/value fuzzing Proposer. No LLM, no network; the no-LLM baseline."""

from kiln.agents.builtin.coder import BuiltinCoder
from kiln.agents.builtin.judge import BuiltinJudge
from kiln.agents.builtin.proposer import BuiltinProposer

__all__ = ["BuiltinCoder", "BuiltinJudge", "BuiltinProposer"]
