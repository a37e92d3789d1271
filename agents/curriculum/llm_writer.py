"""The LLM problem writer: an API set in, a KernelBench-format module out (one fenced block).

Its module is an LLM's code: it is only ever run in the sandbox (validation) and by confined
workers (checks, the built-in Coder's tracing through `ConfinedCoder`), never in kiln's process.
"""

from __future__ import annotations

import re

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from kiln.agents import prompts
from kiln.agents.curriculum.base import ProblemReply, ProblemTask
from kiln.agents.extract import fenced_blocks
from kiln.agents.llm.client import LLMClient
from kiln.agents.llm.transport import BudgetExhausted, LLMCallError

MODEL_RE = re.compile(r"^class\s+Model\b", re.MULTILINE)


def extract_module(text: str) -> tuple[str | None, str | None]:
    """(code, error): the one python block that defines `class Model`."""
    blocks, _ = fenced_blocks(text)
    found = [b.code for b in blocks if b.info.strip().lower() in ("", "python", "py", "python3")
             and MODEL_RE.search(b.code)]
    if len(found) != 1:
        return None, f"expected one python block defining class Model, found {len(found)}"
    return found[0], None


class LLMProblemWriter:
    """Implements `kiln.agents.curriculum.base.ProblemWriter` on top of one chat model."""

    def __init__(self, client: LLMClient, *, lang: str = "triton", time_ms: float = 50.0) -> None:
        self.client, self.lang, self.time_ms = client, lang, time_ms

    def messages(self, task: ProblemTask) -> list[BaseMessage]:
        system = prompts.render("problem_system.j2", lang=self.lang, time_ms=self.time_ms, max_numel=task.max_numel)
        user = prompts.render("problem_user.j2", name=task.name, device=task.device, ops=task.ops)
        return [SystemMessage(system), HumanMessage(user)]

    def write_problem(self, task: ProblemTask) -> ProblemReply:
        try:
            reply = self.client.text(self.messages(task))
        except (BudgetExhausted, LLMCallError) as exc:
            return ProblemReply(ok=False, error=str(exc), author="llm")
        code, error = extract_module(reply.text)
        return ProblemReply(ok=code is not None, source=code, error=error, raw=reply.text, author="llm",
                            usage=reply.usage)
