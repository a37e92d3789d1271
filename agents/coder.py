"""The LLM Coder: generate, repair and optimize modes, with a bounded context.

The prompt holds only the task, the current best candidate, the last candidate and the latest
feedback, never the run's history. The reply must hold exactly one fenced Python block; anything
else is a failed reply (recorded, and its tokens count against the budget like any other call).
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage, SystemMessage

from kiln.agents import prompts
from kiln.agents.base import CoderReply, CoderTask
from kiln.agents.extract import extract_code
from kiln.agents.llm.client import LLMClient, clip, user_message
from kiln.agents.llm.transport import BudgetExhausted, LLMCallError

FEEDBACK_TITLES = {
    "generate": "Notes",
    "repair": "What went wrong (from the verifier)",
    "optimize": "The Judge's plan",
}


class LLMCoder:
    """Implements `kiln.agents.base.Coder` on top of one chat model."""

    def __init__(self, client: LLMClient, *, max_source_chars: int = 24000, max_feedback_chars: int = 8000) -> None:
        self.client = client
        self.max_source_chars = max_source_chars
        self.max_feedback_chars = max_feedback_chars

    def messages(self, task: CoderTask) -> list[BaseMessage]:
        budget = task.budget.model_copy(update={"cases": 1}) if task.budget else None  # the system prompt is constant
        system = prompts.render(
            "coder_system.j2", lang=task.lang, gpu=task.gpu, examples=prompts.examples(task.lang), budget=budget,
            dtype=task.dtype, target=task.target,
        )
        user = prompts.render(
            "coder_user.j2",
            mode=task.mode,
            dtype=task.dtype, target=task.target,
            problem_name=task.problem_name,
            problem_src=task.problem_src,
            best_src=clip(task.best_src, self.max_source_chars),
            best_correct=task.best_correct,
            best_note=task.best_note,
            last_src=clip(task.last_src, self.max_source_chars),
            feedback=clip(task.feedback, self.max_feedback_chars),
            feedback_title=FEEDBACK_TITLES[task.mode],
            sibling=task.sibling, budget=task.budget, cost=task.cost,
        )
        note = f"the reference; do not change it; the verifier runs it in {task.dtype}, inputs and weights cast to it"
        return [SystemMessage(system), user_message(prompts.problem_block(task.problem_name, task.problem_src, note),
                                                    user)]

    def write(self, task: CoderTask) -> CoderReply:
        try:
            reply = self.client.text(self.messages(task))
        except BudgetExhausted as exc:
            return CoderReply(ok=False, error=f"no call made: {exc}", failure="budget")
        except LLMCallError as exc:
            return CoderReply(ok=False, error=str(exc), failure="call")
        if reply.oversized_chars:
            error = (f"the reply is {reply.oversized_chars} characters, over kiln's cap of "
                     f"{self.client.max_reply_chars}: answer with the kernel module only")
            return CoderReply(ok=False, error=error, raw=reply.text, usage=reply.usage, failure="reply")
        found = extract_code(reply.text)
        return CoderReply(ok=found.ok, source=found.code, error=found.error, raw=reply.text,
                          notes=found.notes, usage=reply.usage, failure=None if found.ok else "reply")
