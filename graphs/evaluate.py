"""The evaluate node: check every pending candidate through the Evaluator in the runtime context,
with the current stress cases as `--case` files. Checks are cached in the run directory by content
hash, so a resumed run never redoes a finished evaluation."""

from __future__ import annotations

from pathlib import Path

from langgraph.runtime import Runtime

from kiln.graphs import rundir
from kiln.graphs.common import case_paths, emit, timed
from kiln.graphs.context import RunContext
from kiln.graphs.reward import reward_of
from kiln.graphs.state import Candidate, RunState, TimeEntry
from kiln.graphs.strategies import next_frontier, rank
from kiln.tools.records import CheckOptions, CheckRecord


def check_options(ctx: RunContext, cases: list[Path]) -> CheckOptions:
    o = ctx.options
    return CheckOptions(device=o.device, dtype=o.dtype, trials=o.trials, cases=[str(p) for p in cases],
                        timeout_s=o.check_timeout_s, seed=o.seed, isolation=o.isolation, bwrap=o.bwrap)


def run_check(ctx: RunContext, cand: Candidate, cases: list[Path]) -> CheckRecord:
    """One check, from the cache when this exact (source, cases, options) was checked before."""
    assert cand.source_path is not None
    path = ctx.run_dir / cand.source_path
    options = check_options(ctx, cases)
    key = rundir.check_key(path.read_text(), cases, options)
    record = rundir.cached_check(ctx.run_dir, key)
    if record is not None:
        rundir.event(ctx.run_dir, "check_cached", id=cand.id, key=key)
        return record
    emit(stage="evaluate", candidate=cand.id)
    record = ctx.evaluator.check(ctx.problem, path, options)
    rundir.store_check(ctx.run_dir, key, record)
    rundir.event(ctx.run_dir, "check", id=cand.id, key=key, status=record.status, cases=[p.stem for p in cases])
    return record


def failure_text(record: CheckRecord) -> str | None:
    """What a repair needs, in the Coder's terms."""
    if record.correct and record.status == "ok":
        return None
    parts = [f"Status: {record.status}."]
    if record.compile and record.compile.errors:
        parts.append("Compile errors:\n" + "\n".join(record.compile.errors[:5]))
    if record.correctness and record.correctness.first_failure:
        parts.append("Mismatch: " + record.correctness.first_failure)
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
    n = len(list((ctx.run_dir / "candidates" / cand.id).glob("check*.json")))
    rel = f"candidates/{cand.id}/check{'' if n == 0 else f'_{n}'}.json"
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
        "check_path": rel, "cases_checked": sorted(p.stem for p in cases),
        "failed_cases": failed_case_names(record), "feedback": failure_text(record),
    })
    rundir.write_json(ctx.run_dir, f"candidates/{cand.id}/reward.json", {"candidate": cand.id, **r.model_dump()})
    return updated


def stage_times(record: CheckRecord, iteration: int) -> list[TimeEntry]:
    """Compile and timing seconds as recorded; verification is the rest of the check's wall time
    (stages that run side by side are not double-counted when the record has a total)."""
    st = record.stages_s
    compile_s, time_s = st.get("compile", 0.0), st.get("timing", 0.0)
    if "total" in st:
        verify_s = max(0.0, st["total"] - compile_s - time_s)
    else:
        verify_s = sum(v for k, v in st.items() if k not in ("compile", "timing"))
    out = {"compile": compile_s, "verify": verify_s, "time": time_s}
    return [TimeEntry(iteration=iteration, kind=k, seconds=v) for k, v in out.items() if v]


def best_after(cands: dict[str, Candidate]) -> str | None:
    ranked = rank([c for c in cands.values() if c.source_path])
    return ranked[0].id if ranked else None


@timed("evaluate")
def evaluate(state: RunState, runtime: Runtime[RunContext]) -> dict:
    ctx = runtime.context
    cands = dict(state.get("candidates", {}))
    cases = case_paths(ctx, state)
    updated: dict[str, Candidate] = {}
    times: list[TimeEntry] = []
    for cid in state.get("pending", []):
        cand = cands[cid]
        if cand.source_path is None:
            continue
        record = run_check(ctx, cand, cases)
        updated[cid] = apply_record(ctx, cand, record, cases)
        times += stage_times(record, state.get("iteration", 0))
    cands.update(updated)
    old_best = cands.get(state.get("best_id") or "")
    new_best = best_after(cands)
    better = new_best is not None and (old_best is None or cands[new_best].reward > old_best.reward + 1e-9)
    frontier, tree = next_frontier({**state, "candidates": cands}, state.get("pending", []), ctx.options)
    emit(stage="evaluate", best=new_best, best_speedup=cands[new_best].speedup_vs_eager if new_best else None)
    return {"candidates": updated, "pending": [], "best_id": new_best, "frontier": frontier, "tree": tree,
            "no_progress": 0 if better else state.get("no_progress", 0) + 1, "times": times}
