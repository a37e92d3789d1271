"""The propose node: stress the best kernel. Cases it has not yet been checked with go first; then
the Proposer writes new ones aimed at the candidate, each validated against the reference. Valid
cases join the verification suite of every later candidate; a failing one becomes a minimal repro
for the Coder."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from langgraph.runtime import Runtime

from kiln.agents.base import ProposerInput, ProposerReply, StressCase, Usage
from kiln.graphs import rundir, stop
from kiln.graphs.admit import admit
from kiln.graphs.cases import problem_numel, safe_name, validate
from kiln.graphs.checks import apply_record, best_after, budget_of, check_candidate, cost_of, settle
from kiln.graphs.common import problem_name, problem_src, source_of, timed
from kiln.graphs.context import RunContext
from kiln.graphs.rules import best
from kiln.graphs.state import Candidate, RunState, TimeEntry
from kiln.graphs.suite import Suite, is_current


def _repro(ctx: RunContext, cand: Candidate, suite: list[Path]) -> str | None:
    """The smallest failing case, as a module the Coder can run, with what went wrong."""
    failing = [p for p in suite if p.stem in cand.failed_cases]
    if not failing:
        return cand.feedback
    smallest = min(failing, key=lambda p: len(p.read_text()))
    return (f"Counterexample: stress case '{smallest.stem}' breaks this kernel.\n{cand.feedback or ''}\n"
            f"Minimal repro (problem format):\n```python\n{smallest.read_text()}\n```")


def _recheck(ctx: RunContext, cand: Candidate, suite: Suite, it: int) -> tuple[Candidate, list[TimeEntry]]:
    updated, times = check_candidate(ctx, cand, suite, it)
    return updated.model_copy(update={"feedback": _repro(ctx, updated, suite.paths(ctx))}), times


def cost_facts(ctx: RunContext, cand: Candidate, n_cases: int) -> dict:
    """What a new case will cost: the device, the check's budget (its calls per case and the one
    correctness stage for all cases), and the candidate's measured cost per case so far."""
    cost = cost_of(ctx, cand)
    return {"device": ctx.options.device, "budget": budget_of(ctx, n_cases, cost), "cost": cost}


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
    """The Proposer's round, once: a node cut short later (Ctrl-C during the re-check) finds the
    round it already paid for in proposals/ and does not ask, or run the cases, again."""
    inp = ProposerInput(problem_name=problem_name(ctx), problem_src=problem_src(ctx),
                        candidate_src=source_of(ctx, cand) or "",
                        existing_cases=[c.name for c in state.get("cases", [])], max_cases=ctx.options.max_cases,
                        **cost_facts(ctx, cand, 1 + len(Suite.of(state).cases)))
    rel = f"proposals/{rundir.sha(inp.model_dump_json() + str(state.get('stress_rounds', 0)))[:24]}.json"
    if (ctx.run_dir / rel).is_file():
        rundir.event(ctx.run_dir, "proposal_cached", candidate=cand.id, file=rel)
        return _load_round(json.loads((ctx.run_dir / rel).read_text()))
    new, update = _ask_now(ctx, state, inp)
    stop.guard_result()
    rundir.write_json(ctx.run_dir, rel, {"cases": [c.model_dump() for c in new], **_dump_round(update)})
    return new, update


def _dump_round(update: dict) -> dict:
    return {**update, "usage": [u.model_dump() for u in update["usage"]], "times": [t.model_dump() for t in update["times"]]}


def _load_round(data: dict) -> tuple[list[StressCase], dict]:
    cases = [StressCase.model_validate(c) for c in data.pop("cases")]
    return cases, {**data, "usage": [Usage.model_validate(u) for u in data["usage"]],
                   "times": [TimeEntry.model_validate(t) for t in data["times"]]}


def _ask_now(ctx: RunContext, state: RunState, inp: ProposerInput) -> tuple[list[StressCase], dict]:
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
             TimeEntry(iteration=it, kind="cases", seconds=time.monotonic() - t0)]
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
    suite, it = Suite.of(state), state.get("iteration", 0)
    if suite.problem_numel is None:  # measured before the run (graphs.preflight) unless it did not finish
        suite.problem_numel = problem_numel(ctx)
    update: dict = {"times": []}
    new_cases: list[StressCase] = []
    if not is_current(cand, suite.names()):
        cand, times = _recheck(ctx, cand, suite, it)  # cases written for other candidates come first
        update["times"] += times
    if cand.correct:
        new_cases, asked = _ask(ctx, state, cand)
        update = {**asked, "times": update["times"] + asked["times"]}
        adm = admit(ctx, cand, new_cases, it)
        suite.add(adm.admitted)
        for name, why in adm.retired.items():  # too slow to check: retired before any full check, with the cost
            suite.retire(name, why)
            rundir.event(ctx.run_dir, "case_retired", name=name, reason=why, candidate=cand.id)
        update["times"] += adm.times
        if adm.failed is not None:  # the probe's counterexample is the verdict on the cases it ran
            paths = [ctx.run_dir / c.path for c in adm.failed_cases]
            cand = apply_record(ctx, cand, adm.failed, paths)
            cand = cand.model_copy(update={"feedback": _repro(ctx, cand, paths)})
        elif adm.admitted:
            cand, times = _recheck(ctx, cand, suite, it)
            update["times"] += times
    cands = {**state.get("candidates", {}), cand.id: cand}
    settled, times = settle(ctx, cands, suite, it)  # the suite grew: older verdicts are checked again
    cands.update(settled)
    update["times"] += times
    rundir.event(ctx.run_dir, "stress", candidate=cand.id, correct=cand.correct, failed=cand.failed_cases)
    new_best = best_after(cands, suite.names())
    # the stressed kernel goes first: when it failed a new case, the counterexample is its repair
    frontier = [cand.id, *[f for f in state.get("frontier", []) if f != cand.id]]
    return {**update, "cases": new_cases, "candidates": {cand.id: cand, **settled}, "best_id": new_best,
            "frontier": frontier, "retired": suite.retired_now, "problem_numel": suite.problem_numel}
