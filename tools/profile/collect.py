"""Collect: run the candidate under ncu or the torch profiler, in a subprocess, into a work dir.

Returns the paths of what was written; parsing happens elsewhere. The only process spawned here is
the target program (through CORE's isolation helpers); ncu itself is spawned by `ncu.run_ncu`."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from pydantic import Field

from kiln.tools.profile import metrics as m
from kiln.tools.profile import ncu
from kiln.tools.records import Record


class Collected(Record):
    rung: str
    work_dir: str
    ok: bool = False
    error: str | None = None
    refused: bool = Field(False, description="counters were refused: fall back")
    files: dict[str, str] = Field(default_factory=dict, description="raw, details, source, report, trace, target")
    wall_s: float = 0.0
    log_tail: str = ""


def target_env(work: Path) -> dict[str, str]:
    """The profiled program's environment: the check workers' scrubbed one, never the full one
    (an import error here is kiln's bug and raises)."""
    from kiln.tools.sandbox.isolation import scrubbed_env

    return scrubbed_env(device="cuda", gpu_index=0, cache_dir=work / "cache")


def target_argv(problem: Path, candidate: Path, mode: str, out: Path, dtype: str) -> list[str]:
    return [sys.executable, "-m", "kiln.tools.profile.target", "--problem", str(problem.resolve()),
            "--candidate", str(candidate.resolve()), "--mode", mode, "--out", str(out), "--dtype", dtype]


def metric_set(cache_dir: Path, gpu_name: str) -> m.MetricSet:
    """The curated set checked against this GPU's `--query-metrics`, cached per GPU."""
    cached = m.load_cached(cache_dir, gpu_name)
    if cached is not None:
        return cached
    run = ncu.run_ncu(ncu.QUERY_ARGS, timeout_s=60)
    available = m.parse_query_metrics(run.stdout)
    if run.error or not available:
        return m.unchecked_metrics()
    bases = sorted({m.base_name(n) for names in m.CURATED.values() for n in names} & available)
    suffix = ncu.run_ncu(ncu.suffix_query_args(bases), timeout_s=60)
    full = m.parse_query_suffixes(suffix.stdout) if not suffix.error else None
    mset = m.choose_metrics(available, gpu_name, full or None)
    m.save_cached(cache_dir, mset)
    return mset


def collect_ncu(problem: Path, candidate: Path, *, work: Path, level: str, dtype: str, mset: m.MetricSet,
                timeout_s: float = 240.0) -> Collected:
    t0 = time.monotonic()
    work.mkdir(parents=True, exist_ok=True)
    out = work / "target"
    report = work / "profile.ncu-rep"
    run = _profile(problem, candidate, out, report, mset, level, dtype, work, timeout_s)
    bad = ncu.rejected_metrics(run.stdout + run.stderr, mset) if run.error and not run.timed_out else []
    if bad:  # a name the GPU does not know after all: drop it and try once more
        mset = mset.model_copy(update={"chosen": {r: n for r, n in mset.chosen.items() if n not in bad}})
        run = _profile(problem, candidate, out, report, mset, level, dtype, work, timeout_s)
    col = Collected(rung="ncu", work_dir=str(work), log_tail=(run.stdout + run.stderr)[-3000:])
    if run.error or not report.is_file():
        col.refused = ncu.refusal_reason(run.stdout + run.stderr) is not None
        col.error = run.error or "ncu wrote no report: no kernel ran inside the NVTX range"
        col.wall_s = time.monotonic() - t0
        return col
    col.files = {"report": str(report), "target": str(out / "target.json")}
    for page in ("raw", "details", "source"):
        imp = ncu.run_ncu(ncu.import_args(report, page), timeout_s=60)
        if imp.error:  # older or newer ncu without the extra print flags: the plain page
            imp = ncu.run_ncu(["--import", str(report), "--csv", "--page", page], timeout_s=60)
        path = work / f"{page}.csv"
        path.write_text(imp.stdout)
        if not imp.error and imp.stdout.strip():
            col.files[page] = str(path)
    col.ok = "raw" in col.files
    col.error = None if col.ok else "ncu could not export the raw page of its own report"
    col.wall_s = time.monotonic() - t0
    return col


def _profile(problem: Path, candidate: Path, out: Path, report: Path, mset: m.MetricSet, level: str, dtype: str,
             work: Path, timeout_s: float) -> ncu.NcuRun:
    args = ncu.profile_args(target_argv(problem, candidate, "ncu", out, dtype), report=report, metrics=mset, level=level)
    return ncu.run_ncu(args, timeout_s=timeout_s, env=target_env(work), cwd=work)


def collect_torch(problem: Path, candidate: Path, *, work: Path, dtype: str, timeout_s: float = 180.0,
                  isolation: str = "best-effort", bwrap: str | None = None) -> Collected:
    t0 = time.monotonic()
    work.mkdir(parents=True, exist_ok=True)
    out = work / "target"
    argv = target_argv(problem, candidate, "torch", out, dtype)
    rc, tail = _run_target(argv, work, timeout_s, isolation=isolation, bwrap=bwrap)
    col = Collected(rung="torch_profiler", work_dir=str(work), log_tail=tail, wall_s=time.monotonic() - t0)
    if rc != 0 or not (out / "trace.json").is_file():
        col.error = f"the profiled program failed (exit {rc}): " + (tail.strip().splitlines() or ["?"])[-1][:300]
        return col
    col.ok = True
    col.files = {"trace": str(out / "trace.json"), "target": str(out / "target.json")}
    return col


def collect_static(problem: Path, candidate: Path, *, work: Path, dtype: str, timeout_s: float = 240.0,
                   isolation: str = "best-effort", bwrap: str | None = None) -> Collected:
    """No GPU: record the Triton launches under the interpreter, then build them for sm_90 offline."""
    t0 = time.monotonic()
    work.mkdir(parents=True, exist_ok=True)
    out = work / "static"
    base = [sys.executable, "-m", "kiln.tools.profile.static_triton"]
    args = ["--problem", str(problem.resolve()), "--candidate", str(candidate.resolve()), "--out", str(out),
            "--dtype", dtype]
    col = Collected(rung="static", work_dir=str(work))
    for phase, interpret in (("record", True), ("build", False)):
        rc, tail = _run_target([*base, phase, *args], work, timeout_s, interpret=interpret, isolation=isolation,
                               bwrap=bwrap)
        if rc != 0:
            col.error = f"Triton {phase} step failed (exit {rc}): " + (tail.strip().splitlines() or ["?"])[-1][:300]
            col.wall_s = time.monotonic() - t0
            return col
    col.ok, col.files, col.wall_s = True, {"target": str(out / "target.json")}, time.monotonic() - t0
    return col


def _run_target(argv: list[str], work: Path, timeout_s: float, *, interpret: bool | None = None,
                isolation: str = "best-effort", bwrap: str | None = None) -> tuple[int | None, str]:
    """Run the target program in the OS sandbox at the caller's isolation level (a run passes its
    checks' `--isolation` and `--bwrap`): it reads the problem and the candidate, writes only `work`."""
    from kiln.tools.sandbox.box import sandbox_for
    from kiln.tools.sandbox.confine import Confinement
    from kiln.tools.sandbox.isolation import run_isolated

    env = target_env(work)
    if interpret is not None:  # compile-only runs: no GPU; the interpreter only where asked
        env["CUDA_VISIBLE_DEVICES"] = ""
        env.pop("TRITON_INTERPRET", None)
        if interpret:
            env["TRITON_INTERPRET"] = "1"
    reads = tuple(argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("--problem", "--candidate"))
    res = run_isolated(argv, env=env, cwd=work, timeout_s=timeout_s, sandbox=sandbox_for(isolation, bwrap),
                       confinement=Confinement(read=reads, write=(str(work.resolve()),)))
    if res.timed_out:
        return None, f"timed out after {timeout_s:.0f} s\n{res.stderr_tail}"
    return res.returncode, res.stderr_tail
