"""Validate a generated module: statically in kiln's process, then by the probe in the sandbox,
then judged here, in kiln's process, from what the probe measured.

A module is refused, with the reason kept, when it: is not a KernelBench-format module; does not
run; gives non-finite outputs under any of the check's hidden input distributions; gives two
different answers to the same seed and inputs; is degenerate (constant, near zero,
input-independent, weight-independent); is ill-conditioned (its fp32 output misses its fp64 output
by more than the check's tolerance, so no honest fp32 kernel could pass); or is over the time or
memory budget on the target device. Duplicates are found by the hash of its normalised graph.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kiln.agents.base import StressCase
from kiln.tools.errors import KilnInputError
from kiln.tools.problem import load_problem

REPORT_CAP_BYTES = 4 << 20


class Budget(BaseModel):
    """What a module may cost on the target device."""

    model_config = ConfigDict(extra="forbid")

    time_ms: float = Field(description="median forward time")
    memory_bytes: int = Field(description="peak device memory on a GPU; inputs + weights + outputs on a CPU")
    cond_ratio: float = Field(0.5, description="max |fp32 - fp64| / (atol + rtol |fp64|) allowed")
    rerun_diff: float = Field(1e-6, description="max |difference| between two runs of the same seed and inputs")
    probe_timeout_s: float = 180.0

    @classmethod
    def for_device(cls, device: str) -> Budget:
        if device == "cuda":
            return cls(time_ms=50.0, memory_bytes=16 << 30)
        return cls(time_ms=1000.0, memory_bytes=64 << 20)


class ProbeReport(BaseModel):
    """What the sandboxed probe wrote (untrusted: parsed, size-capped, every field optional)."""

    model_config = ConfigDict(extra="forbid")

    device: str = ""
    run_error: str | None = None
    outputs: list[list[int]] = Field(default_factory=list)
    numel: int = 0
    nonfinite: dict[str, int] | None = None
    rerun_diff: float | None = None
    degenerate: list[str] | None = None
    cond_ratio: float | None = None
    time_ms: float | None = None
    memory_bytes: int | None = None
    graph: list[Any] | None = None
    errors: dict[str, str] = Field(default_factory=dict, description="measurement -> why it failed")


class ModuleVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    accepted: bool
    reason: str | None = Field(None, description="why it was refused, one line")
    graph_hash: str | None = None
    probe: ProbeReport | None = None
    stress: list[str] = Field(default_factory=list, description="names of the stress variants that passed")
    stress_refused: list[str] = Field(default_factory=list, description="'name: why' for each variant refused")


class Sandboxing(BaseModel):
    """Which OS sandbox the probe and the confined Coder run in (as `kiln check --isolation`)."""

    model_config = ConfigDict(extra="forbid")

    isolation: str = "best-effort"
    bwrap: str | None = None


def scratch_dir(prefix: str) -> tempfile.TemporaryDirectory:
    """A dir under kiln's scratch root: the only place a sandboxed process may write."""
    from kiln.tools.sandbox import scratch

    return tempfile.TemporaryDirectory(prefix=prefix, dir=scratch.root())


def confined_run(argv: list[str], *, tmp: Path, device: str, gpu_index: int, timeout_s: float,
                 module: str = "kiln.agents.curriculum.probe", box: Sandboxing | None = None) -> str | None:
    """Run `python -m MODULE ARGV` like a check's worker: in the OS sandbox (no network, no secrets,
    `tmp` the only place it may write), its own session, rlimits. None when it exited cleanly, else
    one line on how it ended."""
    from kiln.tools.sandbox.box import sandbox_for
    from kiln.tools.sandbox.confine import Confinement
    from kiln.tools.sandbox.isolation import default_as_limit, run_isolated, scrubbed_env

    box = box or Sandboxing()
    env = scrubbed_env(device=device, gpu_index=gpu_index, cache_dir=tmp / "cache")
    env.pop("TRITON_INTERPRET", None)  # the module is PyTorch: nothing to interpret
    res = run_isolated([sys.executable, "-m", module, *argv], env=env, cwd=tmp, timeout_s=timeout_s,
                       as_limit_bytes=default_as_limit(device), confinement=Confinement(write=(str(tmp),)),
                       sandbox=sandbox_for(box.isolation, box.bwrap))
    if res.timed_out:
        return f"too slow: it did not finish in {timeout_s:.0f} s"
    if res.returncode != 0:
        lines = [ln for ln in res.stderr_tail.splitlines() if ln.strip()]
        return f"it died: {lines[-1][:200] if lines else f'exit {res.returncode}'}"
    return None


def _parse(raw: Any) -> ProbeReport:
    try:
        errors = {k[: -len("_error")]: str(v) for k, v in raw.items() if k.endswith("_error") and k != "run_error"}
        fields = {k: v for k, v in raw.items() if not k.endswith("_error") or k == "run_error"}
        return ProbeReport.model_validate({**fields, "errors": errors})
    except (ValidationError, AttributeError):
        return ProbeReport(run_error="the probe's report is not what kiln writes")


def _read_reports(path: Path, n: int) -> list[ProbeReport]:
    from kiln.tools.sandbox.isolation import read_regular

    try:  # the probe's folder is the sandbox's: never through a link, never from a FIFO, capped
        text = read_regular(path, REPORT_CAP_BYTES + 1)
    except OSError:
        return [ProbeReport(run_error="the probe wrote no readable report")] * n
    if len(text) > REPORT_CAP_BYTES:
        return [ProbeReport(run_error="the probe wrote no readable report")] * n
    try:
        raw = json.loads(text)
    except ValueError:
        raw = None
    if not isinstance(raw, list) or len(raw) != n:
        return [ProbeReport(run_error="the probe's report is not what kiln writes")] * n
    return [_parse(r) for r in raw]


def probe_modules(sources: list[str], *, device: str, gpu_index: int = 0, timeout_s: float = 180.0,
                  box: Sandboxing | None = None) -> list[ProbeReport]:
    """Probe a module and its variants in one sandboxed process; one report each."""
    with scratch_dir("probe-") as tmp_name:
        tmp = Path(tmp_name)
        paths = []
        for i, src in enumerate(sources):
            paths.append(tmp / f"module{i}.py")
            paths[-1].write_text(src)
        died = confined_run([device, str(tmp / "report.json"), *map(str, paths)], tmp=tmp, device=device,
                            gpu_index=gpu_index, timeout_s=timeout_s, box=box)
        return [ProbeReport(run_error=died)] * len(sources) if died else _read_reports(tmp / "report.json", len(sources))


def static_error(source: str) -> str | None:
    """Is it a KernelBench-format module at all (AST only, nothing runs)?"""
    with tempfile.TemporaryDirectory(prefix="kiln-module-") as tmp:
        path = Path(tmp) / "module.py"
        path.write_text(source)
        try:
            load_problem(path, what="module")
        except KilnInputError as err:
            return str(err).replace(str(path), "module").splitlines()[0]
    return None


def graph_hash(graph: list[Any]) -> str:
    return hashlib.sha256(json.dumps(graph, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def _first(*checks: tuple[bool, str]) -> str | None:
    return next((why for bad, why in checks if bad), None)


def judge(report: ProbeReport, budget: Budget) -> str | None:
    """Why the probed module is refused, or None. Computed here, never in the module's process."""
    if report.run_error:
        return f"does not run: {report.run_error}"
    bad_dist = [d for d, n in (report.nonfinite or {}).items() if n]
    for key in ("nonfinite", "rerun_diff", "degenerate", "cond_ratio", "time_ms", "memory_bytes"):
        if key in report.errors or getattr(report, key) is None and key != "cond_ratio":
            return f"could not measure {key}: {report.errors.get(key, 'no value')}"
    return _first(
        (bool(bad_dist), f"non-finite outputs under the {', '.join(bad_dist)} inputs"),
        ((report.rerun_diff or 0.0) > budget.rerun_diff,
         f"nondeterministic: two runs with one seed differ by {report.rerun_diff:.3g}"),
        (bool(report.degenerate), f"degenerate: {'; '.join(report.degenerate or [])}"),
        ((report.cond_ratio or 0.0) > budget.cond_ratio,
         f"ill-conditioned: fp32 misses fp64 by {report.cond_ratio:.3g}x the tolerance"),
        ((report.time_ms or 0.0) > budget.time_ms, f"too slow: {report.time_ms:.1f} ms > {budget.time_ms:g} ms"),
        ((report.memory_bytes or 0) > budget.memory_bytes,
         f"too large: {(report.memory_bytes or 0) / 2**20:.1f} MiB > {budget.memory_bytes / 2**20:g} MiB"),
    )


def validate_module(source: str, stress: list[StressCase], *, device: str, budget: Budget,
                    gpu_index: int = 0, box: Sandboxing | None = None) -> ModuleVerdict:
    """The whole gate for one module and its stress variants (a refused variant is dropped, with
    its reason, not the module)."""
    if why := static_error(source):
        return ModuleVerdict(accepted=False, reason=f"not a problem module: {why}")
    from kiln.agents.casecheck import static_problem_error

    variants = [c for c in stress if not static_problem_error(c.source, source)]
    reports = probe_modules([source, *(c.source for c in variants)], device=device, gpu_index=gpu_index,
                            timeout_s=budget.probe_timeout_s * (1 + len(variants)), box=box)
    report = reports[0]
    if why := judge(report, budget):
        return ModuleVerdict(accepted=False, reason=why, probe=report.model_copy(update={"graph": None}))
    if report.graph is None:
        why = f"could not trace its graph: {report.errors.get('graph', 'no graph')}"
        return ModuleVerdict(accepted=False, reason=why, probe=report)
    verdict = ModuleVerdict(accepted=True, graph_hash=graph_hash(report.graph),
                            probe=report.model_copy(update={"graph": None}))
    for case in stress:
        rep = reports[1 + variants.index(case)] if case in variants else None
        why = static_problem_error(case.source, source) if rep is None else judge(rep, budget)
        (verdict.stress_refused.append(f"{case.name}: {why}") if why else verdict.stress.append(case.name))
    return verdict
