"""What a check cost and what it left undone, read from its record: the one source of every cost
figure the Coder, the Judge and the Proposer are shown (issue 25 item 4), rendered by one template
(`prompts/check_cost.j2`).

Units, said once: a *trial* draws one set of inputs and calls the candidate on it twice (a first and
a second call on the same inputs); each call is one trial record, one *call*. Seconds per call are
the mean of the trial records' own `candidate_s`: the check's per-case totals (`CaseSummary`) add
both calls of a trial, and dividing them by the trials counted each call twice (the Proposer's
"2.76 s per candidate call" against the records' 1.4 s).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from kiln.tools.records import JSON_SAFE, CheckRecord, TrialRecord

FIRST_PHASES = ("first_call", "before_reference")


class CostRecord(BaseModel):
    model_config = JSON_SAFE


class CaseCost(CostRecord):
    """One case (the problem or a stress case) in one check."""

    name: str
    calls: int = Field(0, description="candidate calls compared on it (two per trial)")
    calls_passed: int = 0
    calls_planned: int | None = Field(None, description="calls the check planned on it (None: not known)")
    s_per_call: float | None = Field(None, description="mean wall seconds of one candidate call on it")
    reference_s_per_trial: float | None = Field(None, description="the reference worker's seconds per trial")
    timed_out: bool = Field(False, description="the check's time ran out while it ran")

    @property
    def projected_s(self) -> float | None:
        """Seconds its planned calls take at its measured rate."""
        if self.s_per_call is None or self.calls_planned is None:
            return None
        return self.s_per_call * self.calls_planned


class CheckCost(CostRecord):
    """One check's cost, per case and in all, and what its time budget was."""

    status: str
    cases: list[CaseCost] = Field(default_factory=list)
    calls: int = 0
    calls_passed: int = 0
    calls_planned: int | None = Field(None, description="candidate calls the check planned (None: not recorded)")
    correctness_s: float | None = Field(None, description="seconds the correctness stage took, as recorded")
    budget_s: float | None = Field(None, description="the correctness stage's time, shared by every case")
    ran_out: bool = Field(False, description="the check's time ran out before every planned call ran")
    more_needed_s: float | None = Field(None, description="about how many more seconds the calls left needed")

    @property
    def all_passed(self) -> bool:
        return self.calls > 0 and self.calls_passed == self.calls

    @property
    def too_slow(self) -> bool:
        """Every call that ran passed, and the time ran out: correct as far as it ran, too slow to finish."""
        return self.ran_out and self.all_passed

    @property
    def s_per_call(self) -> float | None:
        times = [c.s_per_call * c.calls for c in self.cases if c.s_per_call is not None]
        n = sum(c.calls for c in self.cases if c.s_per_call is not None)
        return sum(times) / n if n else None

    def case(self, name: str) -> CaseCost | None:
        return next((c for c in self.cases if c.name == name), None)


def rate_at_least(cost: CheckCost, case: CaseCost) -> float:
    """Seconds per call at least, for the case a check ran out of time in: its call in flight took
    the stage's time that the finished calls do not account for."""
    stage = cost.correctness_s or (cost.budget_s if cost.ran_out else None) or 0.0  # a stage that ran out used it all
    in_flight = stage - sum((c.s_per_call or 0.0) * c.calls for c in cost.cases)
    return max(case.s_per_call or 0.0, in_flight)


def planned_calls_per_case(trials: int) -> int:
    """Candidate calls a check plans per case before it has run: two per trial, `trials` per basic
    input distribution and fewer for the wide ones (`kiln.tools.inputs.trial_count`). A check's own
    record (`CorrectnessRecord.n_planned`) wins once there is one."""
    from kiln.tools.inputs import DISTRIBUTIONS, trial_count

    return 2 * sum(trial_count(d, trials) for d in DISTRIBUTIONS)


def _case_cost(name: str, trials: list[TrialRecord], planned: int | None, record: CheckRecord) -> CaseCost:
    times = [t.candidate_s for t in trials if t.candidate_s is not None]
    summary = record.correctness.cases.get(name) if record.correctness else None
    n_trials = sum(t.phase in FIRST_PHASES for t in trials)
    ref = summary.reference_s / n_trials if summary and summary.reference_s is not None and n_trials else None
    return CaseCost(name=name, calls=len(trials), calls_passed=sum(t.passed for t in trials), calls_planned=planned,
                    s_per_call=sum(times) / len(times) if times else None, reference_s_per_trial=ref,
                    timed_out=bool(summary and summary.timed_out))


def _planned(record: CheckRecord, names: list[str]) -> dict[str, int | None]:
    c = record.correctness
    own = c.n_planned_by_case if c else None
    if own:
        return {n: own.get(n) for n in names}
    if c is None or not c.n_planned:
        return {n: None for n in names}
    return {n: c.n_planned // len(names) for n in names}  # every case gets the same plan


def check_cost(record: CheckRecord, *, budget_s: float | None = None, cases: list[str] | None = None,
               running: str | None = None) -> CheckCost:
    """The cost of `record`'s check. `cases`: the stress cases it was run with (so cases with no
    call yet count too); `running`: the case its time ran out in, when known."""
    c = record.correctness
    trials = c.trials if c else []
    names = ["problem", *[n for n in (cases or []) if n != "problem"]]
    names += sorted({t.case for t in trials} - set(names))
    planned = _planned(record, names)
    costs = [_case_cost(n, [t for t in trials if t.case == n], planned[n], record) for n in names]
    if running:
        costs = [x.model_copy(update={"timed_out": True}) if x.name == running else x for x in costs]
    out = CheckCost(status=record.status, cases=costs, calls=len(trials), calls_passed=sum(t.passed for t in trials),
                    calls_planned=(c.n_planned or None) if c else None, correctness_s=record.stages_s.get("correctness"),
                    budget_s=budget_s, ran_out=record.status == "timeout")
    if out.ran_out:
        out.more_needed_s = _more_needed(out)
    return out


def _more_needed(cost: CheckCost) -> float | None:
    mean = cost.s_per_call
    if mean is None:
        return None
    if all(c.calls_planned is not None for c in cost.cases):
        return sum(max(0, (c.calls_planned or 0) - c.calls) * (c.s_per_call or mean) for c in cost.cases)
    return max(0, (cost.calls_planned or 0) - cost.calls) * mean if cost.calls_planned else None


ROOM_MARGIN = 0.8
"""Share of the correctness stage that planned calls may fill at their measured rates: the rest is
for the workers' own overhead and the rates' spread."""


class CheckBudget(CostRecord):
    """The time a check gives a candidate's correctness trials, and what it plans in that time."""

    device: str = "cpu"
    correctness_s: float | None = Field(None, description="the correctness stage's seconds, shared by every case")
    calls_per_case: int = Field(description="candidate calls a check plans per case")
    cases: int = Field(1, description="cases in a check now: the problem plus the active stress cases")

    @property
    def s_per_call_max(self) -> float | None:
        """The most one call may take on average for every planned call of every case to fit."""
        if not self.correctness_s or not self.calls_per_case:
            return None
        return ROOM_MARGIN * self.correctness_s / (self.calls_per_case * self.cases)


def room_s(cost: CheckCost, budget: CheckBudget) -> float | None:
    """Seconds of the correctness stage left for new cases once the planned calls of the cases in
    `cost`'s check are paid at their measured rates (None: a rate or the budget is not known)."""
    if not budget.correctness_s:
        return None
    spent = [c.s_per_call * (c.calls_planned or budget.calls_per_case) for c in cost.cases if c.s_per_call is not None]
    if len(spent) < len(cost.cases):
        return None
    return max(0.0, ROOM_MARGIN * budget.correctness_s - sum(spent))
