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

from kiln.graphs.context import RunContext
from kiln.graphs.state import Candidate, RunState, StressCase
from kiln.tools.records import CaseSummary, CheckRecord

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


def case_summaries(record: CheckRecord) -> dict[str, CaseSummary]:
    """Per case: trials compared and passed, seconds over them. From the check's own summary when it
    has one, else counted from its trials."""
    c = record.correctness
    if c is None:
        return {}
    if c.cases:
        return dict(c.cases)
    out: dict[str, CaseSummary] = {}
    times: dict[str, list[float]] = {}
    for t in c.trials:
        s = out.setdefault(t.case, CaseSummary())
        s.n_trials, s.n_passed = s.n_trials + 1, s.n_passed + int(t.passed)
        if t.candidate_s is not None:
            times.setdefault(t.case, []).append(t.candidate_s)
    for name, ts in times.items():
        out[name].candidate_s = sum(ts)
    late = timed_out_case(record)
    if late is not None:
        out.setdefault(late, CaseSummary()).timed_out = True
    return out


def _secs(value: float | None, digits: int = 2) -> str:
    return "not recorded" if value is None else f"{value:.{digits}f} s"


def per_call(total_s: float | None, n_trials: int) -> float | None:
    """Seconds per call from a case's total over its trials (CaseSummary's candidate_s, reference_s)."""
    return total_s / n_trials if total_s is not None and n_trials else None


BIG_CASE_RATIO = 4
"""A case whose inputs hold at least this many times the problem's elements is a large case."""


def slow_case(record: CheckRecord, suite: Suite, cand_id: str, device: str) -> tuple[str, str] | None:
    """(case, reason) when the check ran out of time in a stress case that the candidate cannot be
    shown to fail: every trial that ran passed, and either at least one of them was on that case
    (correct there, only slow), or the case is large (inputs >= 4x the problem's) and not one call
    of it finished in the time the other cases left. Retiring it is the rule. A wrong result
    anywhere, the problem itself, or a small case (a hang on batch 1 is a bug) retires nothing."""
    if record.status != "timeout" or record.correctness is None:
        return None
    name = timed_out_case(record)
    case = suite.get(name) if name else None
    if case is None or not record.correctness.trials or any(not t.passed for t in record.correctness.trials):
        return None
    mine = case_summaries(record).get(case.name) or CaseSummary()
    where = "under the Triton interpreter on the CPU" if device == "cpu" else f"on {device}"
    if mine.n_passed >= 1:
        return case.name, (f"retired after {cand_id}'s check: every trial that ran passed ({mine.n_passed} on this "
                           f"case), but one candidate call on it takes {_secs(per_call(mine.candidate_s, mine.n_trials), 1)} "
                           f"{where} (the reference: {_secs(per_call(mine.reference_s, mine.n_trials) or case.reference_s)}), "
                           "and its trials do not fit in the check's time")
    ratio = (case.input_numel or 0) / suite.problem_numel if suite.problem_numel else 0.0
    if ratio < BIG_CASE_RATIO:
        return None
    return case.name, (f"retired after {cand_id}'s check: every trial of the other cases passed, but not one "
                       f"candidate call on this case finished {where} in the time they left; its inputs are "
                       f"{ratio:.0f}x the problem's (the reference: {_secs(case.reference_s)} per call)")


def cost_lines(record: CheckRecord) -> list[str]:
    """'case: n of m trials passed, X s per candidate call (reference Y s)' per case, for feedback."""
    out = []
    for name, s in sorted(case_summaries(record).items(), key=lambda kv: kv[0] != "problem"):
        late = "; the time ran out here" if s.timed_out else ""
        out.append(f"{name}: {s.n_passed} of {s.n_trials} trials passed, {_secs(per_call(s.candidate_s, s.n_trials))} "
                   f"per candidate call (reference {_secs(per_call(s.reference_s, s.n_trials))}){late}")
    return out
