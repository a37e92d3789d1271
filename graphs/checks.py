"""Checks inside the loop: one candidate against the suite, with the check cache; its record turned
into the candidate's verdict, reward and feedback; the retirement rule applied; and `settle`, which
checks stale verdicts again before they are used for selection."""

from __future__ import annotations

from pathlib import Path

from kiln.agents.checkcost import CheckBudget, CheckCost, check_cost, planned_calls_per_case
from kiln.agents.judge import physics_floors
from kiln.graphs import rundir, stop
from kiln.graphs.common import emit
from kiln.graphs.context import RunContext
from kiln.graphs.reward import reward_of
from kiln.graphs.state import Candidate, TimeEntry
from kiln.graphs.strategies import rank
from kiln.graphs.suite import Suite, is_current, rank_current, slow_case, timed_out_case
from kiln.tools.records import CheckOptions, CheckRecord

SETTLE_LIMIT = 3
"""At most this many stale candidates are checked again per node before the best is chosen."""


def correctness_budget_s(ctx: RunContext) -> float | None:
    """The correctness stage's seconds in the run's checks (shared by every case of the suite)."""
    from kiln.tools.check.budgets import stage_timeouts

    return stage_timeouts(ctx.options.check).get("correctness")


def record_of(ctx: RunContext, cand: Candidate | None) -> CheckRecord | None:
    if cand is None or cand.check_path is None:
        return None
    return CheckRecord.model_validate_json((ctx.run_dir / cand.check_path).read_text())


def cost_of(ctx: RunContext, cand: Candidate | None) -> CheckCost | None:
    """What the candidate's latest check cost, per case (kiln.agents.checkcost: the one source)."""
    record = record_of(ctx, cand)
    if record is None or cand is None:
        return None
    return check_cost(record, budget_s=correctness_budget_s(ctx), cases=cand.cases_checked,
                      running=timed_out_case(record))


def budget_of(ctx: RunContext, n_cases: int, cost: CheckCost | None = None) -> CheckBudget:
    """The check's time budget for a suite of `n_cases` cases (the problem included); its calls per
    case from a check's own record when there is one, else from the trial plan."""
    known = cost.case("problem") if cost else None
    per_case = known.calls_planned if known and known.calls_planned else planned_calls_per_case(ctx.options.trials)
    return CheckBudget(device=ctx.options.device, correctness_s=correctness_budget_s(ctx), calls_per_case=per_case,
                       cases=n_cases)


def check_options(ctx: RunContext, cases: list[Path]) -> CheckOptions:
    """The run's check options (`--trials`, `--dtype`, `--check-timeout`, `--seed`) plus the suite."""
    return ctx.options.check.model_copy(update={"cases": [str(p) for p in cases]})


def run_check(ctx: RunContext, cand: Candidate, cases: list[Path], *, probe: bool = False) -> CheckRecord:
    """One check, from the cache when this exact (source, cases, options) was checked before.
    `probe`: one trial per case and no timing, to measure what each case costs (graphs.admit)."""
    assert cand.source_path is not None
    path = ctx.run_dir / cand.source_path
    options = check_options(ctx, cases)
    if probe:
        options = options.model_copy(update={"trials": 1, "time": False})
    key = rundir.check_key(path.read_text(), cases, options)
    record = rundir.cached_check(ctx.run_dir, key)
    kind = "probe" if probe else "check"
    if record is not None:
        rundir.event(ctx.run_dir, f"{kind}_cached", id=cand.id, key=key)
        return record
    emit(stage="evaluate", candidate=cand.id)
    record = ctx.evaluator.check(ctx.problem, path, options)
    stop.guard_result()  # a check ended by Ctrl-C is no verdict: never cached
    rundir.store_check(ctx.run_dir, key, record)
    rundir.event(ctx.run_dir, kind, id=cand.id, key=key, status=record.status, cases=[p.stem for p in cases])
    return record


def failure_text(record: CheckRecord) -> str | None:
    """What a repair needs, in the Coder's terms (what the check cost, per case, reaches the Coder
    through its task's `cost`, rendered by the one cost template)."""
    if record.correct and record.status == "ok":
        return None
    parts = [f"Status: {record.status}."]
    if record.compile and record.compile.errors:
        parts.append("Compile errors:\n" + "\n".join(record.compile.errors[:5]))
    first = record.correctness.first_failure if record.correctness else None
    if first and first.rstrip(".") not in record.reasons:
        parts.append("Mismatch: " + first)
    parts += [f"Reason: {r}" for r in record.reasons[:5]]
    if record.integrity:
        parts += [f"Integrity {f.rule}: {f.evidence}" for f in record.integrity.findings if f.severity == "reject"]
    if len(parts) == 1 and record.stderr_tail:
        parts.append("stderr:\n" + record.stderr_tail[-1500:])
    return rundir.redact("\n".join(parts))


def failed_case_names(record: CheckRecord) -> list[str]:
    trials = record.correctness.trials if record.correctness else []
    return sorted({t.case for t in trials if not t.passed and t.case != "problem"})


def apply_record(ctx: RunContext, cand: Candidate, record: CheckRecord, cases: list[Path]) -> Candidate:
    """The candidate updated with a (new) check record, which is written next to its source."""
    rel = rundir.RunDir(ctx.run_dir).next_rel(cand.id, "check")
    rundir.write_json(ctx.run_dir, rel, record)
    r = reward_of(record)
    speedups = record.timing.speedups if record.timing and record.timing.measured else {}
    eager, compiled = speedups.get("eager"), speedups.get("compile")
    physics = record.integrity.physics if record.integrity else None
    updated = cand.model_copy(update={
        "status": record.status, "correct": r.correct, "frac_passed": r.frac_passed, "reward": r.reward,
        "speedup_vs_eager": record.speedup_vs_eager, "speedup_vs_compile": record.speedup_vs_compile,
        "speedup_eager_ci_low": eager.ci_low if eager else None,
        "speedup_compile_ci_low": compiled.ci_low if compiled else None,
        "pct_of_roofline": physics.pct_of_floor if physics else None,
        "floors_ratio": f.ratio if (f := physics_floors(record)) else None,
        "check_path": rel, "cases_checked": sorted(p.stem for p in cases),
        "failed_cases": failed_case_names(record), "feedback": failure_text(record),
        "timed_out_case": timed_out_case(record),
    })
    rundir.write_json(ctx.run_dir, rundir.RunDir.candidate_rel(cand.id, "reward.json"), {"candidate": cand.id, **r.model_dump()})
    return updated


def stage_times(record: CheckRecord, iteration: int) -> list[TimeEntry]:
    """Compile and timing seconds as recorded; verification is the rest of the workers' wall time
    (stages that run side by side are not double-counted when the record has a total), and the
    check's time outside its workers is its own figure (`check_setup`)."""
    st = record.stages_s
    compile_s, time_s = st.get("compile", 0.0), st.get("timing", 0.0)
    setup_s = max(0.0, st["total"] - st["total_workers"]) if "total" in st and "total_workers" in st else 0.0
    if "total" in st:
        verify_s = max(0.0, st["total"] - setup_s - compile_s - time_s)
    else:
        verify_s = sum(v for k, v in st.items() if k not in ("compile", "timing", "total_workers") and "." not in k)
    out = {"compile": compile_s, "verify": verify_s, "time": time_s, "check_setup": setup_s}
    return [TimeEntry(iteration=iteration, kind=k, seconds=v) for k, v in out.items() if v]


def best_after(cands: dict[str, Candidate], names: set[str]) -> str | None:
    """The best candidate by a current verdict (stale ones only when none is current)."""
    ranked = rank_current([c for c in cands.values() if c.source_path], names)
    return ranked[0].id if ranked else None


def check_candidate(ctx: RunContext, cand: Candidate, suite: Suite, it: int) -> tuple[Candidate, list[TimeEntry]]:
    """Check `cand` with the suite. When its check ran out of time in a stress case it was passing,
    the case is retired by rule (recorded, with why) and the candidate checked again without it."""
    record = run_check(ctx, cand, suite.paths(ctx))
    updated, times = apply_record(ctx, cand, record, suite.paths(ctx)), stage_times(record, it)
    slow = slow_case(record, suite, cand.id, ctx.options.device, correctness_budget_s(ctx))
    if slow is None:
        return updated, times
    suite.retire(*slow)
    rundir.event(ctx.run_dir, "case_retired", name=slow[0], reason=slow[1], candidate=cand.id)
    record = run_check(ctx, updated, suite.paths(ctx))
    return apply_record(ctx, updated, record, suite.paths(ctx)), times + stage_times(record, it)


def could_pass(cand: Candidate) -> bool:
    """Passed its suite, or failed it only by running out of time with no wrong result: a check
    under today's suite could make it correct."""
    return cand.correct or (cand.status == "timeout" and not cand.failed_cases and cand.timed_out_case is not None)


def settle(ctx: RunContext, cands: dict[str, Candidate], suite: Suite, it: int,
           limit: int = SETTLE_LIMIT) -> tuple[dict[str, Candidate], list[TimeEntry]]:
    """Check stale verdicts again, best first, until no candidate that passed an older suite could
    still beat the best current verdict (at most `limit` checks): the run's best is never a kernel
    that fails the suite while one that passes it was only ever checked under an older one. Stale
    failing candidates are not checked again: they rank after every current verdict."""
    pool, changed, times = dict(cands), {}, []
    for _ in range(limit):
        names = suite.names()
        current = rank([c for c in pool.values() if c.source_path and is_current(c, names)])
        stale = rank([c for c in pool.values() if c.source_path and could_pass(c) and not is_current(c, names)])
        if not stale or (current and current[0].reward >= stale[0].reward):
            break
        stale = stale[0]
        rundir.event(ctx.run_dir, "recheck", id=stale.id, reason="checked under another suite",
                     suite=sorted(suite.names()))
        pool[stale.id], spent = check_candidate(ctx, stale, suite, it)
        changed[stale.id] = pool[stale.id]
        times += spent
    return changed, times


