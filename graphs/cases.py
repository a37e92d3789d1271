"""Validation of Proposer cases against the reference, before any candidate sees them: same
`Model` as the problem (only init inputs and `get_inputs` may differ), loads, runs in its own
process within the time limit, returns tensors. The checks themselves are `kiln.agents.casecheck`'s
(one implementation for the LLM Proposer's own screening and the graph's)."""

from __future__ import annotations

from pathlib import Path

from kiln.agents.base import StressCase
from kiln.agents.casecheck import CaseRun, run_case, static_problem_error
from kiln.agents.casecheck import safe_name as stem_safe
from kiln.graphs import rundir, stop
from kiln.graphs.context import RunContext


def static_problem(source: str, problem_src: str) -> str | None:
    """Why the case is not a valid variant of the problem, or None."""
    return static_problem_error(source, problem_src)


def run_reference(case: Path, device: str, timeout_s: float) -> str | None:
    """Run the case's reference once, sandboxed; why it failed, or None."""
    return run_case(case.read_text(), device=device, timeout_s=timeout_s).error


def _run(ctx: RunContext, path: Path) -> CaseRun:
    check = ctx.options.check
    return run_case(path.read_text(), device=ctx.options.device, timeout_s=ctx.options.case_timeout_s,
                    isolation=check.isolation, bwrap=check.bwrap)


def safe_name(name: str, taken: set[str]) -> str:
    base = stem_safe(name)[:48] or "case"
    base = base if base[0].isalpha() else f"case_{base}"
    out, i = base, 2
    while out in taken or out == "problem":
        out, i = f"{base}_{i}", i + 1
    return out


def validate(ctx: RunContext, case: StressCase, taken: set[str], round_: int) -> StressCase:
    """Write the proposed case into the run dir and validate it against the reference: the same case,
    now at its path (its source no longer held), with the verdict."""
    name = safe_name(case.name, taken)
    rel = f"cases/{name}.py"
    path = rundir.write(ctx.run_dir, rel, case.source)
    why = static_problem(case.source, ctx.problem.read_text())
    ran = CaseRun(error=why) if why else _run(ctx, path)
    stop.guard_result()  # a reference run ended by Ctrl-C says nothing about the case
    rundir.event(ctx.run_dir, "case", name=name, valid=ran.error is None, reason=ran.error or "ok",
                 reference_s=ran.forward_s, input_numel=ran.input_numel)
    return StressCase(name=name, path=rel, valid=ran.error is None, reason=ran.error or "ok", rationale=case.rationale,
                      round=round_, reference_s=ran.forward_s, input_numel=ran.input_numel)


def problem_numel(ctx: RunContext) -> int | None:
    """Elements in the problem's own inputs (one reference run), to tell a large case from the problem."""
    return _run(ctx, ctx.problem).input_numel
