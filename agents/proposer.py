"""The LLM Proposer: stress-test cases for the current problem, aimed at the candidate.

Each case comes back through structured output and is screened before it is returned: a usable,
new name, within the number asked for, and the problem's own `Model` with new inputs (static check).
Refused cases are listed in `rejected` with the reason. The reference is not run here: whoever
holds the cases runs it once per case, under its own isolation and case timeout (the graph:
`kiln.graphs.cases.validate`; `kiln.agents.casecheck.run_case`).
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage, SystemMessage
from pydantic import BaseModel, Field

from kiln.agents import prompts
from kiln.agents.base import ProposerInput, ProposerReply, StressCase
from kiln.agents.casecheck import NAME_OK, safe_name, static_problem_error
from kiln.agents.checkcost import room_s
from kiln.agents.facts import candidate_facts
from kiln.agents.llm.client import LLMClient, clip, user_message
from kiln.agents.llm.transport import BudgetExhausted, LLMCallError

MAX_SOURCE_CHARS = 24000


class CaseDraft(BaseModel):
    """One stress-test case."""

    name: str = Field(description="file-stem name: lowercase letters, digits, underscores")
    source: str = Field(description="the whole module: the problem's Model verbatim, get_init_inputs, get_inputs")
    rationale: str = Field(description="which assumption of the candidate it attacks, one sentence")


class ProposedCases(BaseModel):
    """Stress-test cases for the candidate kernel."""

    cases: list[CaseDraft] = Field(description="the new cases, at most the number asked for")


class LLMProposer:
    """Implements `kiln.agents.base.Proposer` on top of one chat model."""

    def __init__(self, client: LLMClient) -> None:
        self.client = client

    def messages(self, inp: ProposerInput) -> list[BaseMessage]:
        from kiln.tools.inputs import DISTRIBUTIONS  # imports torch: only when a Proposer prompt is built

        system = prompts.render("proposer_system.j2", distributions=[d.words for d in DISTRIBUTIONS.values()])
        room = room_s(inp.cost, inp.budget) if inp.cost and inp.budget else None
        problem = inp.cost.case("problem") if inp.cost else None
        problem_s = problem.s_per_call * (problem.calls_planned or inp.budget.calls_per_case) \
            if problem and problem.s_per_call is not None and inp.budget else None
        user = prompts.render(
            "proposer_user.j2", problem_name=inp.problem_name, problem_src=inp.problem_src,
            candidate_src=clip(inp.candidate_src, MAX_SOURCE_CHARS), candidate_facts=candidate_facts(inp.candidate_src),
            existing_cases=inp.existing_cases, max_cases=inp.max_cases, device=inp.device, budget=inp.budget,
            cost=inp.cost, room_s=room, problem_s=problem_s,
        )
        problem = prompts.problem_block(inp.problem_name, inp.problem_src)
        return [SystemMessage(system), user_message(problem, user)]

    def propose(self, inp: ProposerInput) -> ProposerReply:
        try:
            reply = self.client.structured(self.messages(inp), ProposedCases)
        except BudgetExhausted as exc:
            return ProposerReply(error=f"no call made: {exc}", failure="budget")
        except LLMCallError as exc:
            return ProposerReply(error=str(exc), failure="call")
        if reply.parsed is None and reply.budget_stop:
            return ProposerReply(error=f"no retry made: {reply.budget_stop}", usage=reply.usage, failure="budget")
        if reply.parsed is None:
            return ProposerReply(error=f"unusable proposer reply: {reply.error}", usage=reply.usage, failure="reply")
        cases, rejected = self.screen(reply.parsed.cases, inp)
        error = None if cases else "no usable case" + (f" ({len(rejected)} rejected)" if rejected else "")
        return ProposerReply(cases=cases, rejected=rejected, error=error, usage=reply.usage)

    def screen(self, drafts: list[CaseDraft], inp: ProposerInput) -> tuple[list[StressCase], list[str]]:
        """Keep valid, new cases (at most `max_cases`); say why each other one went."""
        taken = set(inp.existing_cases)
        cases: list[StressCase] = []
        rejected: list[str] = []
        for draft in drafts:
            name = safe_name(draft.name)
            why = self._problem(name, draft, inp, taken, len(cases))
            if why:
                rejected.append(f"{name or draft.name!r}: {why}")
                continue
            taken.add(name)
            cases.append(StressCase(name=name, source=draft.source, rationale=draft.rationale))
        return cases, rejected

    def _problem(self, name: str, draft: CaseDraft, inp: ProposerInput, taken: set[str], n_kept: int) -> str | None:
        if not NAME_OK.match(name):
            return "no usable name"
        if name in taken:
            return "duplicate name"
        if n_kept >= inp.max_cases:
            return f"over the limit of {inp.max_cases} cases"
        return static_problem_error(draft.source, inp.problem_src)
