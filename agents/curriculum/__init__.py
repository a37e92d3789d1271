"""The Proposer's problem-writing role for kiln's co-evolving curriculum.

`catalogue` (op families and argument spaces), `sets` (API sets), `template` (the built-in writer),
`llm_writer` (the LLM writer), `validate` + `probe` (the sandboxed gate every module passes),
`confined_coder` (the built-in Coder run confined, for LLM-written modules).
"""

from __future__ import annotations

from typing import Any

from kiln.agents.curriculum.base import ApiSet, ProblemReply, ProblemTask, ProblemWriter

__all__ = ["ApiSet", "ProblemReply", "ProblemTask", "ProblemWriter", "problem_writer"]


def problem_writer(roles: Any, *, lang: str = "triton", time_ms: float = 50.0, stress: int = 1) -> ProblemWriter:
    """The writer for a run's Proposer spec: `builtin` -> TemplateWriter, an LLM -> LLMProblemWriter on
    the client `kiln.agents.registry.resolve_roles` built for the proposer role."""
    if roles.specs.get("proposer", "builtin") == "builtin":
        from kiln.agents.curriculum.template import TemplateWriter

        return TemplateWriter(stress=stress)
    from kiln.agents.curriculum.llm_writer import LLMProblemWriter

    return LLMProblemWriter(roles.proposer.client, lang=lang, time_ms=time_ms)
