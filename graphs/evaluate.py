"""The evaluate node: check every pending candidate through the Evaluator in the runtime context,
with the current stress cases as `--case` files. Checks are cached in the run directory by content
hash, so a resumed run never redoes a finished evaluation."""

from __future__ import annotations

from langgraph.runtime import Runtime

from kiln.graphs.checks import best_after, check_candidate, settle
from kiln.graphs.common import emit, timed
from kiln.graphs.context import RunContext
from kiln.graphs.state import Candidate, RunState, TimeEntry
from kiln.graphs.strategies import next_frontier
from kiln.graphs.suite import Suite


@timed("evaluate")
def evaluate(state: RunState, runtime: Runtime[RunContext]) -> dict:
    ctx = runtime.context
    cands = dict(state.get("candidates", {}))
    suite, it = Suite.of(state), state.get("iteration", 0)
    updated: dict[str, Candidate] = {}
    times: list[TimeEntry] = []
    for cid in state.get("pending", []):
        if cands[cid].source_path is None:
            continue
        updated[cid], spent = check_candidate(ctx, cands[cid], suite, it)
        times += spent
    cands.update(updated)
    settled, spent = settle(ctx, cands, suite, it)  # a stale verdict is checked again before it ranks
    cands.update(settled)
    updated.update(settled)
    times += spent
    old_best = cands.get(state.get("best_id") or "")
    new_best = best_after(cands, suite.names())
    better = new_best is not None and (old_best is None or cands[new_best].reward > old_best.reward + 1e-9)
    frontier, tree = next_frontier({**state, "candidates": cands}, state.get("pending", []), ctx.options)
    emit(stage="evaluate", best=new_best, best_speedup=cands[new_best].speedup_vs_eager if new_best else None)
    return {"candidates": updated, "pending": [], "best_id": new_best, "frontier": frontier, "tree": tree,
            "no_progress": 0 if better else state.get("no_progress", 0) + 1, "times": times,
            "retired": suite.retired_now}
