"""The judge node: hard rules first (in code, over the Judge), then the Judge's typed decision per
frontier candidate, then a typed `Command` to code, propose or finish."""

from __future__ import annotations

import time
from typing import Literal

from langgraph.runtime import Runtime
from langgraph.types import Command

from kiln.agents.base import CaseView, JudgeDecision, JudgeInput
from kiln.agents.casecheck import module_sizes
from kiln.agents.llm.client import clip
from kiln.graphs import rundir
from kiln.graphs.checks import cost_of
from kiln.graphs.code import decision_key
from kiln.graphs.common import problem_name, problem_src, source_of, timed
from kiln.graphs.context import RunContext
from kiln.graphs.rules import (
    best,
    hard_rules,
    iterations_spent,
    speedup_for_target,
    stress_ok,
    valid_case_names,
)
from kiln.graphs.state import Candidate, RunState, TimeEntry
from kiln.graphs.suite import active_cases
from kiln.tools.profile.records import ProfileReport
from kiln.tools.records import CheckRecord

Goto = Literal["code", "propose", "finish"]


def failing_case(ctx: RunContext, state: RunState, cand: Candidate) -> CaseView | None:
    """The smallest stress case the kernel fails (or ran out of time on), as the Judge sees it."""
    paths = {c.name: ctx.run_dir / c.path for c in active_cases(state)}
    names = [n for n in cand.failed_cases if n in paths]
    outcome = "the kernel's output is wrong on it"
    if not names and cand.timed_out_case in paths:
        names, outcome = [cand.timed_out_case], "the check's time ran out while the kernel ran it"
    if not names:
        return None
    name = min(names, key=lambda n: len(paths[n].read_text()))
    src = paths[name].read_text()
    return CaseView(name=name, sizes=module_sizes(src), source=clip(src, 6000) or "", outcome=outcome)


def _judge_input(ctx: RunContext, state: RunState, cand: Candidate) -> JudgeInput:
    assert cand.check_path is not None
    record = CheckRecord.model_validate_json((ctx.run_dir / cand.check_path).read_text())
    note = state.get("profiles", {}).get(cand.id)
    profile = ProfileReport.model_validate_json((ctx.run_dir / note.report_path).read_text()) \
        if note and note.report_path else None
    b = best(state)
    speedup, ci_low = speedup_for_target(b, ctx.options) if b else (None, None)
    return JudgeInput(problem_name=problem_name(ctx), problem_src=problem_src(ctx),
                      candidate_src=source_of(ctx, cand) or "", check=record, profile=profile, gpu=ctx.gpu,
                      iteration=state.get("iteration", 0),
                      best_speedup=speedup, best_speedup_ci_low=ci_low,
                      target_speedup=ctx.options.target_speedup,
                      iters_without_progress=state.get("no_progress", 0),
                      stress_passed=stress_ok(state, cand), stress_cases=len(valid_case_names(state)),
                      failing_case=failing_case(ctx, state, cand), last_override=state.get("last_override"),
                      cost=cost_of(ctx, cand), retired_cases=sorted(state.get("retired", {})))


def _no_code_decision(cand: Candidate) -> JudgeDecision:
    return JudgeDecision(mode="correction", diagnosis=f"The Coder's reply had no usable code: {cand.coder_error}",
                         plan="Reply with one fenced code block.", next="repair")


def _decide(ctx: RunContext, state: RunState, cand: Candidate) -> tuple[JudgeDecision, float]:
    if cand.source_path is None or cand.check_path is None:
        return _no_code_decision(cand), 0.0
    inp = _judge_input(ctx, state, cand)
    t0 = time.monotonic()
    decision = rundir.redact_model(ctx.judge.decide(inp))
    secs = time.monotonic() - t0
    rundir.log_llm_call(ctx.run_dir, "judge", inp, decision, ctx.judge)
    return decision, secs


def _route(state: RunState, ctx: RunContext, top: JudgeDecision) -> tuple[Goto, JudgeDecision, dict]:
    """Apply the hard rules to the Judge's next step."""
    b = best(state)
    correct = b is not None and b.correct
    if top.failure == "budget":
        return "finish", top, {"status": "budget", "stop_reason": top.stop_reason or top.diagnosis}
    nxt, why = top.next, None
    if nxt == "stop" and correct:
        return "finish", top, {"status": "stopped", "stop_reason": f"Judge: {top.stop_reason or top.diagnosis}"}
    if nxt == "stop" or (nxt == "stress" and not correct):
        nxt, why = "repair", f"graph: no '{nxt}' while the best kernel fails a check"
    if nxt == "stress" and b is not None and stress_ok(state, b):
        nxt, why = "optimize", "graph: the best kernel already passes every stress case"
    if nxt == "stress":
        return "propose", top, {}
    top = top.model_copy(update={"next": nxt, "overridden": why}) if why else top
    return "code", top, {}


@timed("judge")
def judge(state: RunState, runtime: Runtime[RunContext]) -> Command[Goto]:
    ctx = runtime.context
    verdict = hard_rules(state, ctx.options)
    if verdict is not None:
        rundir.event(ctx.run_dir, "hard_rule", goto=verdict.goto, reason=verdict.reason)
        update = {"status": verdict.status, "stop_reason": verdict.reason} if verdict.goto == "finish" else {}
        return Command(goto=verdict.goto, update=update)
    spent = iterations_spent(state, ctx.options)
    if spent:  # no Coder round follows: a decision could not be acted on, so none is asked for
        rundir.event(ctx.run_dir, "judge_skipped", reason=spent)
        return Command(goto="finish", update={"status": "budget", "stop_reason": spent})
    cands = state.get("candidates", {})
    frontier = [cands[c] for c in state.get("frontier", []) if c in cands]  # ranked, or the stressed one first
    if not frontier:  # MCTS chose the root: a fresh generation
        return Command(goto="code", update={})
    decisions: dict[str, JudgeDecision] = {}
    usage, times = [], []
    for cand in frontier:
        key = decision_key(cand)
        if key in state.get("decisions", {}):
            continue
        decisions[key], secs = _decide(ctx, state, cand)
        if secs:
            usage.append(decisions[key].usage.model_copy(update={"role": decisions[key].usage.role or "judge"}))
            times.append(TimeEntry(iteration=state.get("iteration", 0), kind="llm", seconds=secs))
    failed = [f"judge: {d.error}" for d in decisions.values() if d.error and d.failure in ("call", "reply")]
    top_key = decision_key(frontier[0])
    top = decisions.get(top_key) or state.get("decisions", {})[top_key]
    goto, top, update = _route(state, ctx, top)
    decisions[top_key] = top
    update["last_override"] = f"on {frontier[0].id}: {top.overridden}" if top.overridden else None
    rundir.event(ctx.run_dir, "route", goto=goto, judge_next=top.next, candidate=frontier[0].id)
    return Command(goto=goto, update={"decisions": decisions, "usage": usage, "times": times, **update,
                                      **({"llm_failures": failed} if failed else {})})
