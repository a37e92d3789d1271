"""Admitting new stress cases by their cost (issue 25 item 3): each new case is first timed with one
trial (a probe check: the problem and the new cases, one trial each, no timing); then the cases get
the time the problem's and the held cases' planned calls leave in the correctness stage, cheapest
first. A case whose planned calls do not fit is retired unverified before any full check, with its
measured cost in the reason, so no full check runs out of time on it and the case that breaks the
budget is the one retired, not whichever was running when the clock stopped.

A wrong result in a probe admits every case, and the probe's record is the kernel's verdict on the
cases it ran: the counterexample goes to the Coder without a full check.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kiln.agents.base import StressCase
from kiln.agents.checkcost import CaseCost, CheckCost, check_cost, rate_at_least, room_s
from kiln.graphs import rundir
from kiln.graphs.checks import budget_of, correctness_budget_s, cost_of, run_check
from kiln.graphs.context import RunContext
from kiln.graphs.state import Candidate, TimeEntry
from kiln.graphs.suite import timed_out_case
from kiln.tools.records import CheckRecord

MAX_PROBES = 4
"""Probe checks per admission at most (a probe that ran out of time is repeated for the cases it never reached)."""


@dataclass
class Admission:
    admitted: list[StressCase] = field(default_factory=list)
    retired: dict[str, str] = field(default_factory=dict)
    times: list[TimeEntry] = field(default_factory=list)
    failed: CheckRecord | None = None
    """A probe with a wrong result: the counterexample, a verdict on the cases it ran (no full check needed)."""
    failed_cases: list[StressCase] = field(default_factory=list)
    """The cases that probe ran."""


def _probe(ctx: RunContext, cand: Candidate, cases: list[StressCase],
           it: int) -> tuple[CheckRecord, CheckCost, list[TimeEntry]]:
    paths = [ctx.run_dir / c.path for c in cases]
    record = run_check(ctx, cand, paths, probe=True)
    rundir.write_json(ctx.run_dir, rundir.RunDir(ctx.run_dir).next_rel(cand.id, "probe"), record)
    cost = check_cost(record, budget_s=correctness_budget_s(ctx), cases=[c.name for c in cases],
                      running=timed_out_case(record))
    total = record.stages_s.get("total", sum(record.stages_s.values()))
    return record, cost, [TimeEntry(iteration=it, kind="cases", seconds=total)]


def admit(ctx: RunContext, cand: Candidate, new: list[StressCase], it: int) -> Admission:
    """Time the new valid cases on `cand`, then admit those whose planned calls fit."""
    out = Admission()
    pending = [c for c in new if c.valid]
    cost = cost_of(ctx, cand)
    budget = budget_of(ctx, 1, cost)
    room = room_s(cost, budget) if cost is not None else None  # what the problem's and held cases' calls leave
    if not pending or room is None or room <= 0 or budget.correctness_s is None:
        out.admitted = pending  # nothing measured, or the problem alone does not fit: the full check decides
        return out
    rates: dict[str, tuple[float, bool]] = {}  # name -> (seconds per call, a lower bound only)
    for _ in range(MAX_PROBES):
        if not pending:
            break
        record, cost, times = _probe(ctx, cand, pending, it)
        out.times += times
        if cost.calls_passed < cost.calls:  # a counterexample: the probe's verdict stands, every case joins
            out.admitted, out.failed, out.failed_cases = pending + [c for c in new if c.name in rates], record, pending
            return out
        if cost.status not in ("ok", "timeout"):  # crashed, rejected...: the full check shows why
            out.admitted = pending + [c for c in new if c.name in rates]
            return out
        seen = {c.name: cost.case(c.name) or CaseCost(name=c.name) for c in pending}  # every probed case is there
        for name, cc in seen.items():
            if cc.timed_out:  # the probe ran out of time in it: its call in flight took at least the rest
                rates[name] = (rate_at_least(cost, cc), True)
            elif cc.calls:
                rates[name] = (cc.s_per_call or 0.0, False)
        left = [c for c in pending if c.name not in rates]  # not reached: probed again
        if len(left) == len(pending):  # the time ran out before any of them (in the problem): nothing to learn
            break
        pending = left
    _choose(out, [c for c in new if c.name in rates], rates, room, budget.calls_per_case, budget.correctness_s)
    out.admitted += pending  # never reached by MAX_PROBES probes: the full check's rule decides
    rundir.event(ctx.run_dir, "cases_admitted", candidate=cand.id, admitted=[c.name for c in out.admitted],
                 retired=sorted(out.retired), room_s=round(room, 1))
    return out


def _choose(out: Admission, cases: list[StressCase], rates: dict[str, tuple[float, bool]], room: float,
            per_case: int, budget: float) -> None:
    """Cheapest first while the planned calls fit in `room`; the rest retired, each with its cost."""
    left = room
    for case in sorted(cases, key=lambda c: rates[c.name][0]):
        rate, bound = rates[case.name]
        need = rate * per_case
        if need <= left:
            out.admitted.append(case)
            left -= need
            continue
        measured = f"at least {rate:.2f} s per call (its one-trial timing ran out of time)" if bound \
            else f"{rate:.2f} s per call (one trial measured)"
        out.retired[case.name] = (
            f"retired unverified before its full check: {measured}, so its {per_case} planned calls need about "
            f"{need:.0f} s; the {budget:.0f} s correctness stage leaves about {max(left, 0):.0f} s for new cases "
            "after the problem's and the held cases' trials")
