"""The finish node: final status (with the last hard rule re-checked), the best kernel as a
standalone file, `rewards.jsonl` and `summary.json`."""

from __future__ import annotations

from langgraph.runtime import Runtime

from kiln.agents.devicepath import verified_paths
from kiln.graphs import rundir
from kiln.graphs.code import unsupported_reason
from kiln.graphs.common import timed
from kiln.graphs.context import RunContext
from kiln.graphs.rules import best, budget_spent, iterations_spent
from kiln.graphs.rundir import RunDir
from kiln.graphs.state import RunState, RunStatus
from kiln.graphs.summary import build_summary, rewards_lines


def final_status(state: RunState, ctx: RunContext) -> tuple[RunStatus, str | None]:
    status: RunStatus = state.get("status") or "running"
    reason = state.get("stop_reason")
    if status == "running":
        cands = state.get("candidates", {})
        last = [c for c in cands if cands[c].iteration == state.get("iteration", 0)]
        unsupported = unsupported_reason(cands, last)
        spent = budget_spent(state, ctx.options) or iterations_spent(state, ctx.options)
        if unsupported and all(cands[c].source_path is None for c in last):
            status, reason = "unsupported", unsupported
        else:
            status, reason = ("budget", spent) if spent else ("stopped", reason or "stopped")
    b = best(state)
    if status == "solved" and not (b and b.correct):  # never "solved" with a failing best kernel
        status, reason = "failed", f"best kernel fails a check (was: {reason})"
    verified = verified_paths(b.device_queries, ctx.options.device) if b else None
    if status == "solved" and verified and ctx.options.device == "cpu":  # one branch of two was checked
        status, reason = "solved_cpu_only", f"{reason}; verified: {verified}"
    return no_code_status(state, status, reason)


def no_code_status(state: RunState, status: RunStatus, reason: str | None) -> tuple[RunStatus, str | None]:
    """When the Coder answered every time but never with a usable kernel, say so: that is the cause,
    whatever budget ran out meanwhile."""
    cands = list(state.get("candidates", {}).values())
    if not cands or any(c.coder_failure != "reply" for c in cands):
        return status, reason
    return "no_code", (f"none of the Coder's {len(cands)} replies held a usable kernel; the last: "
                       f"{cands[-1].coder_error} (the run stopped on: {reason})")


def write_outputs(ctx: RunContext, final: RunState) -> None:
    """The best kernel as a standalone file, rewards.jsonl and summary.json."""
    b = best(final)
    if b is not None and b.source_path is not None:
        rundir.write(ctx.run_dir, RunDir.BEST_KERNEL, (ctx.run_dir / b.source_path).read_text())
    rundir.write(ctx.run_dir, RunDir.REWARDS, rewards_lines(final, ctx.options.device))
    summary = build_summary(final, ctx.options, ctx.run_dir)
    rundir.write_json(ctx.run_dir, RunDir.SUMMARY, summary)
    rundir.event(ctx.run_dir, "finish", status=final.get("status"), reason=final.get("stop_reason"))


@timed("finish")
def finish(state: RunState, runtime: Runtime[RunContext]) -> dict:
    status, reason = final_status(state, runtime.context)
    write_outputs(runtime.context, {**state, "status": status, "stop_reason": reason})
    return {"status": status, "stop_reason": reason}
