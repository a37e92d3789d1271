"""The code node: one Coder round. Each child gets a bounded context (the task, the current best,
its parent and the latest feedback, never the whole history)."""

from __future__ import annotations

import time
from pathlib import Path

from langgraph.runtime import Runtime

from kiln.agents.base import CoderMode, CoderTask, JudgeDecision
from kiln.agents.devicepath import device_queries
from kiln.agents.targetwork import TargetWork, measure_target
from kiln.graphs import rundir
from kiln.graphs.checks import budget_of, cost_of
from kiln.graphs.common import emit, problem_name, problem_src, source_of, timed
from kiln.graphs.context import RunContext
from kiln.graphs.rules import best, budget_spent
from kiln.graphs.state import Candidate, RunState, TimeEntry
from kiln.graphs.strategies import parents_for_round
from kiln.graphs.suite import active_names, is_current

NO_CODE_HINT = "Reply with exactly one fenced code block holding the whole module (ModelNew included)."


def decision_key(cand: Candidate) -> str:
    """Decisions are per candidate *and* per check record: a re-check with new cases needs a new one."""
    return f"{cand.id}|{cand.check_path or ''}"


def _mode_and_feedback(state: RunState, parent: Candidate | None) -> tuple[CoderMode, str | None]:
    if parent is None:
        return "generate", None
    if parent.source_path is None:  # the parent reply had no code: ask again, say why
        has_code = any(c.source_path for c in state.get("candidates", {}).values())
        return ("repair" if has_code else "generate"), f"{parent.coder_error}\n{NO_CODE_HINT}"
    decision: JudgeDecision | None = state.get("decisions", {}).get(decision_key(parent))
    mode: CoderMode = "optimize" if parent.correct else "repair"
    if decision is not None and decision.next in ("repair", "optimize"):
        mode = decision.next
    parts = []
    if decision is not None:
        parts.append(f"Judge: {decision.diagnosis}")
        if decision.plan:
            parts.append(f"Plan: {decision.plan}")
    if mode == "repair" and parent.feedback:
        parts.append(parent.feedback)
    return mode, "\n\n".join(parts) or None


def best_label(state: RunState, b: Candidate | None) -> tuple[bool, str]:
    """(passes today's suite?, a few words that are true of it) for the Coder's 'best kernel' block."""
    if b is None:
        return True, ""
    names = active_names(state)
    if b.correct and is_current(b, names):
        retired = sorted(state.get("retired", {}))
        unchecked = f"; not checked on the retired (too slow to check) {', '.join(retired)}" if retired else ""
        held = f"it passes every check and {len(names)} stress case(s)" if names else "it passes every check"
        return True, held + unchecked
    if b.failed_cases:
        return False, f"it fails the stress case(s) {', '.join(b.failed_cases)}"
    if b.correct:
        return False, "not yet checked with the newest stress cases"
    if b.status == "timeout" and not b.failed_cases and b.frac_passed >= 1.0:
        return False, "every call that ran passed, but its check ran out of time"
    return False, f"status {b.status}, {b.frac_passed:.0%} of the correctness checks passed"


TARGET_FILE = "target_work.json"


def target_of(ctx: RunContext) -> TargetWork | None:
    """The real problem's sizes and floors, for a run on shrunk sizes (measured once, kept in the run dir)."""
    if not ctx.options.original_problem:
        return None
    path = ctx.run_dir / TARGET_FILE
    if path.exists():
        return TargetWork.model_validate_json(path.read_text())
    gpu = ctx.gpu.name if ctx.options.device == "cuda" else None
    work = measure_target(Path(ctx.options.original_problem).read_text(), gpu_name=gpu,
                          isolation=ctx.options.check.isolation, bwrap=ctx.options.check.bwrap)
    rundir.write_json(ctx.run_dir, TARGET_FILE, work)
    return work


def _task(ctx: RunContext, state: RunState, parent: Candidate | None, iteration: int, sibling: int = 0) -> CoderTask:
    mode, feedback = _mode_and_feedback(state, parent)
    last = parent if parent is None or parent.source_path else None
    best_correct, best_note = best_label(state, best(state))
    cost = cost_of(ctx, last)
    return CoderTask(mode=mode, lang=ctx.options.lang, dtype=ctx.options.check.dtype, problem_name=problem_name(ctx),
                     problem_src=problem_src(ctx),
                     best_src=source_of(ctx, best(state)), best_correct=best_correct, best_note=best_note,
                     last_src=source_of(ctx, last), feedback=feedback,
                     gpu=ctx.gpu, iteration=iteration, sibling=sibling, cost=cost,
                     budget=budget_of(ctx, 1 + len(active_names(state)), cost), target=target_of(ctx))


def _write_child(ctx: RunContext, cid: str, parent: Candidate | None, task: CoderTask, reply) -> Candidate:
    lineage = parent.id if parent and parent.source_path else (parent.parent if parent else None)
    cand = Candidate(id=cid, parent=lineage, iteration=task.iteration, mode=task.mode)
    if not reply.ok or not reply.source:
        return cand.model_copy(update={"status": "no_code", "coder_error": rundir.redact(reply.error or "no usable code"),
                                       "coder_failure": reply.failure})
    rel = rundir.RunDir.candidate_rel(cid, "kernel.py")
    rundir.write(ctx.run_dir, rel, reply.source)
    return cand.model_copy(update={"source_path": rel, "source_sha": rundir.sha(reply.source)[:16],
                                   "device_queries": device_queries(reply.source)})


@timed("code")
def code(state: RunState, runtime: Runtime[RunContext]) -> dict:
    ctx = runtime.context
    if budget_spent(state, ctx.options):
        return {"pending": []}
    iteration = state.get("iteration", 0) + 1
    cands = dict(state.get("candidates", {}))
    new: dict[str, Candidate] = {}
    usage, times = [], []
    parents = parents_for_round(state, ctx.options)
    for i, parent_id in enumerate(parents):
        parent = cands.get(parent_id) if parent_id else None
        task = _task(ctx, state, parent, iteration, sibling=parents[:i].count(parent_id))
        emit(stage="code", iteration=iteration, mode=task.mode)
        t0 = time.monotonic()
        reply = ctx.coder.write(task)
        times.append(TimeEntry(iteration=iteration, kind="llm", seconds=time.monotonic() - t0))
        usage.append(reply.usage.model_copy(update={"role": reply.usage.role or "coder"}))
        rundir.log_llm_call(ctx.run_dir, "coder", task, reply, ctx.coder)
        cid = f"c{len(cands) + len(new) + 1:04d}"
        new[cid] = _write_child(ctx, cid, parent, task, reply)
        rundir.event(ctx.run_dir, "candidate", id=cid, mode=task.mode, parent=parent_id, ok=reply.ok,
                     error=reply.error)
    return {"iteration": iteration, "candidates": new, "pending": list(new), "usage": usage, "times": times,
            **round_failure(list(new.values()))}


def round_failure(children: list[Candidate]) -> dict:
    """Stop the run when every child of the round failed at the LLM call (or found its budget spent):
    a dead server or an exhausted budget is not fixed by asking again. Failed replies are listed."""
    failures = [f"coder: {c.coder_error}" for c in children if c.coder_failure in ("call", "reply")]
    update: dict = {"llm_failures": failures} if failures else {}
    kinds = {c.coder_failure for c in children}
    if children and kinds == {"call"}:
        update |= {"status": "llm_error", "stop_reason": f"the Coder's LLM call failed: {children[-1].coder_error}"}
    elif children and kinds == {"budget"}:
        update |= {"status": "budget", "stop_reason": children[-1].coder_error}
    return update


def unsupported_reason(cands: dict[str, Candidate], ids: list[str]) -> str | None:
    """Why the Coder declined a problem it cannot do rather than fake a kernel (its `unsupported` failure)."""
    for cid in ids:
        if cands[cid].coder_failure == "unsupported":
            return cands[cid].coder_error or "unsupported"
    return None
