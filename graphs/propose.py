"""The propose node: stress the best kernel. Cases it has not yet been checked with go first; then
the Proposer writes new ones aimed at the candidate, each validated against the reference. Valid
cases join the verification suite of every later candidate; a failing one becomes a minimal repro
for the Coder."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from langgraph.runtime import Runtime

from kiln.agents.base import ProposerInput, ProposerReply
from kiln.graphs import rundir
from kiln.graphs.cases import safe_name, validate
from kiln.graphs.common import case_paths, problem_name, problem_src, source_of, timed
from kiln.graphs.context import RunContext
from kiln.graphs.evaluate import apply_record, best_after, run_check, stage_times
from kiln.graphs.rules import best
from kiln.graphs.state import Candidate, RunState, StressCase, TimeEntry


def _repro(ctx: RunContext, cand: Candidate, suite: list[Path]) -> str | None:
    """The smallest failing case, as a module the Coder can run, with what went wrong."""
    failing = [p for p in suite if p.stem in cand.failed_cases]
    if not failing:
        return cand.feedback
    smallest = min(failing, key=lambda p: len(p.read_text()))
    return (f"Counterexample: stress case '{smallest.stem}' breaks this kernel.\n{cand.feedback or ''}\n"
            f"Minimal repro (problem format):\n```python\n{smallest.read_text()}\n```")


def _recheck(ctx: RunContext, cand: Candidate, suite: list[Path], it: int) -> tuple[Candidate, list[TimeEntry]]:
    record = run_check(ctx, cand, suite)
    updated = apply_record(ctx, cand, record, suite)
    return updated.model_copy(update={"feedback": _repro(ctx, updated, suite)}), stage_times(record, it)


def _validate_all(ctx: RunContext, proposed: list, taken: set[str], round_: int) -> list[StressCase]:
    """Names first (in order, unique), then the reference runs side by side."""
    named = []
    for case in proposed:
        name = safe_name(case.name, taken)
        taken.add(name)
        named.append(case.model_copy(update={"name": name}))
    with ThreadPoolExecutor(max_workers=max(1, min(4, len(named)))) as pool:
        return list(pool.map(lambda c: validate(ctx, c, set(), round_), named))


def _ask(ctx: RunContext, state: RunState, cand: Candidate) -> tuple[list[StressCase], dict]:
    inp = ProposerInput(problem_name=problem_name(ctx), problem_src=problem_src(ctx),
                        candidate_src=source_of(ctx, cand) or "",
                        existing_cases=[c.name for c in state.get("cases", [])], max_cases=ctx.options.max_cases)
    t0 = time.monotonic()
    reply = ctx.proposer.propose(inp)
    secs = time.monotonic() - t0
    rundir.log_llm_call(ctx.run_dir, "proposer", inp, reply, ctx.proposer)
    round_ = state.get("stress_rounds", 0) + 1
    t0 = time.monotonic()
    new = _validate_all(ctx, reply.cases[: ctx.options.max_cases], {c.name for c in state.get("cases", [])}, round_)
    usage = reply.usage.model_copy(update={"role": reply.usage.role or "proposer"})
    it = state.get("iteration", 0)
    times = [TimeEntry(iteration=it, kind="llm", seconds=secs),
             TimeEntry(iteration=it, kind="verify", seconds=time.monotonic() - t0)]
    return new, {"usage": [usage], "times": times, "stress_rounds": 1, **proposer_failure(reply)}


def proposer_failure(reply: ProposerReply) -> dict:
    """A failed call ends the run (`llm_error`): a kernel is never called stress-tested because the
    Proposer could not be reached. A spent budget ends it as `budget`; a bad reply is only listed."""
    if reply.failure is None or not reply.error:
        return {}
    error = rundir.redact(reply.error)
    update: dict = {"llm_failures": [f"proposer: {error}"]} if reply.failure != "budget" else {}
    if reply.failure == "call":
        update |= {"status": "llm_error", "stop_reason": f"the Proposer's LLM call failed: {error}"}
    elif reply.failure == "budget":
        update |= {"status": "budget", "stop_reason": error}
    return update


@timed("propose")
def propose(state: RunState, runtime: Runtime[RunContext]) -> dict:
    ctx = runtime.context
    cand = best(state)
    assert cand is not None and cand.source_path is not None, "the Judge stresses only a correct kernel"
    suite = case_paths(ctx, state)
    update: dict = {"times": []}
    new_cases: list[StressCase] = []
    it = state.get("iteration", 0)
    if not set(p.stem for p in suite) <= set(cand.cases_checked):
        cand, times = _recheck(ctx, cand, suite, it)  # cases written for other candidates come first
        update["times"] += times
    if cand.correct:
        new_cases, asked = _ask(ctx, state, cand)
        update = {**asked, "times": update["times"] + asked["times"]}
        added = [ctx.run_dir / c.path for c in new_cases if c.valid]
        if added:
            cand, times = _recheck(ctx, cand, suite + added, it)
            update["times"] += times
    cands = {**state.get("candidates", {}), cand.id: cand}
    frontier = [cand.id, *[f for f in state.get("frontier", []) if f != cand.id]]
    rundir.event(ctx.run_dir, "stress", candidate=cand.id, correct=cand.correct, failed=cand.failed_cases)
    return {**update, "cases": new_cases, "candidates": {cand.id: cand}, "best_id": best_after(cands),
            "frontier": frontier}
