"""`summary.json`: what a run produced, from the final state and the run directory."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field

from kiln.agents.devicepath import verified_paths
from kiln.agents.llm.usage import RoleTotals, add_usage
from kiln.graphs.context import RunOptions
from kiln.graphs.rules import best, cost_usd
from kiln.graphs.rundir import RunDir
from kiln.graphs.shrink import ShrinkRecord
from kiln.graphs.state import RunState, RunStatus
from kiln.graphs.suite import active_names, is_current
from kiln.tools.records import JSON_SAFE


class Summary(BaseModel):
    model_config = JSON_SAFE


class BestKernel(Summary):
    path: str | None = Field(default=None, description="standalone copy of the best kernel")
    candidate: str | None = None
    correct: bool = False
    speedup_vs_eager: float | None = Field(default=None, description="None when not measured")
    speedup_vs_compile: float | None = Field(default=None, description="None when not measured")
    reward: float | None = None
    check_path: str | None = Field(default=None, description="its latest CheckRecord (absolute path)")
    failed_cases: list[str] = Field(default_factory=list, description="stress cases of the final suite it fails")
    verified: str | None = Field(default=None, description="which device path the checks ran, when the kernel has "
                                                           "one per device: 'CPU branch only; the CUDA branch never ran'")


class IterationTimes(Summary):
    """Seconds per kind of work in one iteration (graphs.state.TimeEntry says what each kind holds)."""

    iteration: int
    llm_s: float = 0.0
    compile_s: float = 0.0
    verify_s: float = 0.0
    time_s: float = 0.0
    profile_s: float = 0.0
    cases_s: float = Field(0.0, description="stress cases: validated against the reference, timed on the candidate")
    check_setup_s: float = Field(0.0, description="checks' time outside their workers (the run's first check: "
                                                  "starting the fork server)")
    other_s: float = 0.0


class RunSummary(Summary):
    status: RunStatus = Field(description="how the run ended (kiln.graphs.state.RunStatus)")
    stop_reason: str | None = None
    problem: str
    run_dir: str
    device: str
    lang: str
    strategy: str
    speed_measured: bool
    note: str | None = None
    best: BestKernel
    iterations: int
    candidates: int = Field(description="kernels the Coder wrote (replies with usable code)")
    candidate_ids: list[str] = Field(default_factory=list, description="those kernels' ids, in order: each has its "
                                                                       "folder candidates/<id>/ (empty in summaries "
                                                                       "written before this field)")
    replies_without_code: int = Field(0, description="Coder replies with no usable kernel")
    llm_failures: list[str] = Field(default_factory=list, description="'role: error' of every failed LLM call or "
                                                                      "unusable reply, in order")
    suite_note: str | None = Field(None, description="said plainly when the best kernel does not pass the final "
                                                     "suite (the problem and every active stress case)")
    stress_cases: int = Field(description="stress cases in the final suite (valid, not retired)")
    retired_cases: dict[str, str] = Field(default_factory=dict, description="cases retired by rule, with why")
    stress_rounds: int
    tokens: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None = Field(default=None, description="None when no model had a known price")
    usage_by_role: dict[str, RoleTotals] = Field(default_factory=dict)
    per_iteration: list[IterationTimes] = Field(default_factory=list)
    wall_s: float = Field(description="seconds spent inside graph nodes")
    profile_skipped: list[str] = Field(default_factory=list, description="why candidates were not profiled")
    shrunk: ShrinkRecord | None = Field(None, description="--shrink: the sizes checked, and the problem's own")


def load_summary(run_dir: Path) -> RunSummary:
    """A finished run's summary.json, typed (one written by an earlier kiln too: new fields have defaults)."""
    return RunSummary.model_validate_json(RunDir(run_dir).summary.read_text())


def _per_iteration(state: RunState) -> list[IterationTimes]:
    rows: dict[int, dict[str, float]] = {}
    for t in state.get("times", []):
        row = rows.setdefault(t.iteration, {})
        row[f"{t.kind}_s"] = row.get(f"{t.kind}_s", 0.0) + t.seconds
    return [IterationTimes(iteration=i, **{k: round(v, 3) for k, v in r.items()}) for i, r in sorted(rows.items())]


def _by_role(state: RunState) -> dict[str, RoleTotals]:
    out: dict[str, RoleTotals] = {}
    for u in state.get("usage", []):
        add_usage(out.setdefault(u.role or "unknown", RoleTotals()), u)
    return out


def _best(state: RunState, run_dir: Path, device: str = "cpu") -> BestKernel:
    """`correct` means: passes the final suite (a pass under an earlier, smaller suite does not count)."""
    b = best(state)
    if b is None or b.source_path is None:
        return BestKernel()
    correct = b.correct and is_current(b, active_names(state))
    return BestKernel(path=str(run_dir / RunDir.BEST_KERNEL), candidate=b.id, correct=correct,
                      speedup_vs_eager=b.speedup_vs_eager, speedup_vs_compile=b.speedup_vs_compile,
                      reward=b.reward, check_path=str(run_dir / b.check_path) if b.check_path else None,
                      failed_cases=b.failed_cases, verified=verified_paths(b.device_queries, device))


def suite_note(state: RunState) -> str | None:
    """None when the best kernel passes the final suite; otherwise what is true, in one sentence."""
    b, names = best(state), active_names(state)
    if b is None or b.source_path is None or (b.correct and is_current(b, names)):
        return None
    suite = ", ".join(["the problem", *sorted(names)])
    if b.correct:
        missing = ", ".join(sorted(names - set(b.cases_checked))) or "the final suite"
        return f"the best kernel ({b.id}) passed an earlier suite but was never checked with {missing}"
    fails = ", ".join(b.failed_cases) or f"status {b.status}"
    return f"no kernel passes every case of the final suite ({suite}); the best ({b.id}) fails: {fails}"


def build_summary(state: RunState, opts: RunOptions, run_dir: Path) -> RunSummary:
    usage = state.get("usage", [])
    b = _best(state, run_dir, opts.device)
    measured = b.speedup_vs_eager is not None
    note = None if measured else "speed not measured (CPU run: correctness only)" if opts.device == "cpu" \
        else "speed not measured"
    return RunSummary(
        status=state.get("status") or "stopped", stop_reason=state.get("stop_reason"), problem=opts.problem,
        run_dir=str(run_dir), device=opts.device, lang=opts.lang, strategy=opts.strategy, speed_measured=measured,
        note=note, best=b, iterations=state.get("iteration", 0),
        candidates=sum(c.source_path is not None for c in state.get("candidates", {}).values()),
        candidate_ids=sorted(c.id for c in state.get("candidates", {}).values() if c.source_path is not None),
        replies_without_code=sum(c.source_path is None for c in state.get("candidates", {}).values()),
        llm_failures=state.get("llm_failures", [])[-50:],
        stress_cases=len(active_names(state)), stress_rounds=state.get("stress_rounds", 0),
        suite_note=suite_note(state), retired_cases=state.get("retired", {}),
        tokens=sum(u.input_tokens + u.output_tokens for u in usage),
        input_tokens=sum(u.input_tokens for u in usage), output_tokens=sum(u.output_tokens for u in usage),
        cost_usd=cost_usd(state), usage_by_role=_by_role(state), per_iteration=_per_iteration(state),
        wall_s=round(state.get("elapsed_s", 0.0), 3),
        profile_skipped=sorted({n.skipped for n in state.get("profiles", {}).values() if n.skipped}),
        shrunk=opts.shrunk)


def rewards_lines(state: RunState, device: str = "cpu") -> str:
    """One JSON line per candidate: the exported correctness-gated reward (for training use), and
    which device path its checks ran when it has one per device."""
    lines = []
    for c in sorted(state.get("candidates", {}).values(), key=lambda c: c.id):
        lines.append(json.dumps({"candidate": c.id, "parent": c.parent, "iteration": c.iteration,
                                 "source": c.source_path, "status": c.status, "correct": c.correct,
                                 "frac_passed": c.frac_passed, "speedup_vs_eager": c.speedup_vs_eager,
                                 "reward": c.reward, "verified": verified_paths(c.device_queries, device)}))
    return "\n".join(lines) + ("\n" if lines else "")
