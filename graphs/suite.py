"""The verification suite (the problem plus the active stress cases) and whose verdicts it makes current.

A case joins the suite when the Proposer writes it and the reference runs on it; from then on it is
part of every check. It leaves by one rule only: it is *retired* when a candidate that passed every
trial it ran could not finish it within the check's time (a case that costs the candidate far more
than the reference, e.g. a large size under the CPU interpreter). The reason is kept in
`state["retired"]` and in events.jsonl.

A candidate's verdict is *current* when it was checked with every active case and failed nothing
that has since left the suite. Verdicts from different suites are never compared as if they were
one: before a stale candidate is used for selection it is checked again (`graphs.checks.settle`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from kiln.agents.base import StressCase
from kiln.agents.checkcost import CaseCost, CheckCost, check_cost, rate_at_least
from kiln.graphs.context import RunContext
from kiln.graphs.state import Candidate, RunState
from kiln.tools.records import CheckRecord

_TIMEOUT_AT = re.compile(r"timed out in stage correctness \(([^/()]+)/")


@dataclass
class Suite:
    """The active cases while a node runs; `retired_now` collects the cases it retires."""

    cases: list[StressCase]
    retired_now: dict[str, str] = field(default_factory=dict)
    problem_numel: int | None = None

    @classmethod
    def of(cls, state: RunState) -> Suite:
        return cls(active_cases(state), problem_numel=state.get("problem_numel"))

    def get(self, name: str) -> StressCase | None:
        return next((c for c in self.cases if c.name == name), None)

    def names(self) -> set[str]:
        return {c.name for c in self.cases}

    def paths(self, ctx: RunContext) -> list[Path]:
        return [ctx.run_dir / c.path for c in self.cases]

    def add(self, new: list[StressCase]) -> None:
        self.cases += [c for c in new if c.valid]

    def retire(self, name: str, reason: str) -> None:
        self.cases = [c for c in self.cases if c.name != name]
        self.retired_now[name] = reason


def active_cases(state: RunState) -> list[StressCase]:
    retired = state.get("retired", {})
    return [c for c in state.get("cases", []) if c.valid and c.name not in retired]


def active_names(state: RunState) -> set[str]:
    return {c.name for c in active_cases(state)}


def case_paths(ctx: RunContext, state: RunState) -> list[Path]:
    return [ctx.run_dir / c.path for c in active_cases(state)]


def is_current(cand: Candidate, names: set[str]) -> bool:
    """Checked with every active case, and failed (or timed out on) nothing outside the suite."""
    if not names <= set(cand.cases_checked):
        return False
    if not set(cand.failed_cases) <= names:
        return False
    return cand.timed_out_case in (None, "problem") or cand.timed_out_case in names


def rank_current(cands: list[Candidate], names: set[str]) -> list[Candidate]:
    """Best first: current verdicts before stale ones, each by reward (ties to the earlier)."""
    return sorted(cands, key=lambda c: (not is_current(c, names), -c.reward, c.id))


def timed_out_case(record: CheckRecord) -> str | None:
    """The case the correctness stage was running when the check's time ran out."""
    c = record.correctness
    if c is not None:
        flagged = [name for name, s in c.cases.items() if s.timed_out]
        if flagged:
            return flagged[0]
    if record.status != "timeout":
        return None
    for reason in record.reasons:
        m = _TIMEOUT_AT.search(reason)
        if m:
            return m.group(1)
    return None


def _secs(value: float | None, digits: int = 2) -> str:
    return "not recorded" if value is None else f"{value:.{digits}f} s"


BIG_CASE_RATIO = 4
"""A case whose inputs hold at least this many times the problem's elements is a large case."""


def slow_case(record: CheckRecord, suite: Suite, cand_id: str, device: str,
              budget_s: float | None = None) -> tuple[str, str] | None:
    """(case, reason) when the check ran out of time while every call that ran passed: the stress case
    that costs the most (its measured seconds per call times its planned calls; for the case the
    time ran out in, at least its call in flight), not whichever was running when the clock stopped.
    Retiring it is the rule. A wrong result anywhere, the problem being the costliest (the kernel is
    too slow on the problem itself), or a small case no call of which finished (a kernel that hangs
    on batch 1 has a bug) retires nothing."""
    if record.status != "timeout" or record.correctness is None:
        return None
    if not record.correctness.trials or any(not t.passed for t in record.correctness.trials):
        return None
    cost = check_cost(record, budget_s=budget_s, cases=[c.name for c in suite.cases], running=timed_out_case(record))
    per_case = next((c.calls_planned for c in cost.cases if c.calls_planned), None)
    ranked = sorted(((_need_s(cost, c, per_case), c) for c in cost.cases), key=lambda x: -(x[0] or 0.0))
    need, top = ranked[0] if ranked else (None, None)
    case = suite.get(top.name) if top is not None else None
    if case is None or top is None or not need:
        return None
    where = "under the Triton interpreter on the CPU" if device == "cpu" else f"on {device}"
    if top.calls:
        return case.name, (f"retired after {cand_id}'s check: every call that ran passed, but this case costs the most: "
                           f"{_secs(rate_at_least(cost, top) if top.timed_out else top.s_per_call, 1)} per candidate "
                           f"call {where} (the reference: {_secs(top.reference_s_per_trial or case.reference_s)} per "
                           f"trial), about {need:.0f} s for its planned calls, and they do not fit in the check's time")
    ratio = (case.input_numel or 0) / suite.problem_numel if suite.problem_numel else 0.0
    if ratio < BIG_CASE_RATIO:
        return None
    return case.name, (f"retired after {cand_id}'s check: every call of the other cases passed, but not one "
                       f"candidate call on this case finished {where} in the time they left (at least "
                       f"{rate_at_least(cost, top):.1f} s); its inputs are {ratio:.0f}x the problem's (the reference: "
                       f"{_secs(case.reference_s)} per call)")


def _need_s(cost: CheckCost, case: CaseCost, per_case: int | None) -> float | None:
    """Seconds the case's planned calls need: its rate (at least that of its call in flight, for the
    case the time ran out in) times its planned calls."""
    rate = rate_at_least(cost, case) if case.timed_out else case.s_per_call
    planned = case.calls_planned or per_case or max(case.calls, 1)
    return rate * planned if rate is not None else None
