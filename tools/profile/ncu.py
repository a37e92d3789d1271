"""Collect: Nsight Compute. `run_ncu` is the only function in kiln that spawns `ncu`; the argument
lists are built by pure functions so tests can check the flags without a GPU."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from pydantic import Field

from kiln.tools.profile.metrics import SECTIONS_FULL, SECTIONS_QUICK, MetricSet
from kiln.tools.records import Record

NVTX_RANGE = "kiln_candidate"
MAX_LAUNCHES = 32
_REFUSED = (
    ("ERR_NVGPUCTRPERM", "no permission to read GPU performance counters (ERR_NVGPUCTRPERM)"),
    ("LibraryNotLoaded", "the profiler library could not load (sandboxed runtime such as gVisor)"),
    ("Failed to initialize the profiler", "the profiler failed to initialize"),
    ("No supported devices found", "ncu sees no supported GPU"),
)


class NcuRun(Record):
    argv: list[str] = Field(default_factory=list)
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    wall_s: float = 0.0
    timed_out: bool = False
    error: str | None = None


def find_ncu() -> str | None:
    hit = shutil.which("ncu")
    if hit:
        return hit
    roots = sorted(Path("/opt/nvidia/nsight-compute").glob("*/ncu")) if Path("/opt/nvidia").is_dir() else []
    for cand in [*roots, Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "ncu"]:
        if cand.is_file():
            return str(cand)
    return None


def run_ncu(args: list[str], *, timeout_s: float, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> NcuRun:
    """Spawn ncu in its own process group; kill the group on timeout. Never raises."""
    exe = find_ncu()
    if exe is None:
        return NcuRun(error="ncu not found on PATH or under /opt/nvidia/nsight-compute")
    argv = [exe, *args]
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=cwd, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return NcuRun(argv=argv, returncode=proc.returncode, stdout=out[-20000:], stderr=err[-20000:],
                      wall_s=time.monotonic() - t0, timed_out=True, error=f"ncu timed out after {timeout_s:.0f} s")
    run = NcuRun(argv=argv, returncode=proc.returncode, stdout=out, stderr=err, wall_s=time.monotonic() - t0)
    refused = refusal_reason(out + "\n" + err)
    if refused:
        run.error = refused
    elif proc.returncode != 0:
        run.error = f"ncu exited {proc.returncode}: " + _first_error(out + "\n" + err)
    return run


def refusal_reason(text: str) -> str | None:
    """Why counters were refused, from ncu's output (pure); None if they were not."""
    return next((why for key, why in _REFUSED if key in text), None)


def _first_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if "ERROR" in ln or "error" in ln]
    return (lines[0] if lines else text.strip()[-300:])[:300]


def profile_args(target: list[str], *, report: Path, metrics: MetricSet, level: str,
                 nvtx_range: str = NVTX_RANGE) -> list[str]:
    """ncu flags for one candidate: its NVTX range only, all child processes, clocks left alone,
    kernel replay, the curated metrics plus the level's sections, sources embedded."""
    sections = SECTIONS_FULL if level == "full" else SECTIONS_QUICK
    args = [
        "--nvtx", "--nvtx-include", f"{nvtx_range}/",
        "--target-processes", "all", "--clock-control", "none", "--replay-mode", "kernel",
        "--launch-count", str(MAX_LAUNCHES), "--import-source", "yes", "--print-summary", "none",
        "--metrics", ",".join(sorted(set(metrics.chosen.values()))),
    ]
    for s in sections:
        args += ["--section", s]
    return [*args, "--export", str(report), "--force-overwrite", *target]


def import_args(report: Path, page: str) -> list[str]:
    """Read a saved report back as CSV: `raw` (one row per kernel) or `details` (one row per metric)."""
    args = ["--import", str(report), "--csv", "--page", page, "--print-units", "base"]
    if page == "details":
        args += ["--print-details", "all", "--print-rule-details"]
    if page == "source":
        args = ["--import", str(report), "--csv", "--page", "source", "--print-source", "cuda,sass"]
    return args


def rejected_metrics(text: str, mset: MetricSet) -> list[str]:
    """Curated names that ncu's error lines mention (e.g. 'Failed to find metric X'), pure."""
    errors = [ln for ln in text.splitlines() if "ERROR" in ln or "rror" in ln]
    return [n for n in set(mset.chosen.values()) if any(n in ln or n.split(".")[0] in ln for ln in errors)]


QUERY_ARGS = ["--query-metrics"]


def suffix_query_args(bases: list[str]) -> list[str]:
    """List every rollup/submetric of the given base metrics (to check full names)."""
    return ["--query-metrics", "--query-metrics-mode", "suffix", "--metrics", ",".join(bases)]
_VERSION = re.compile(r"Version\s+([\w.\-() ]+)")


def parse_version(text: str) -> str | None:
    m = _VERSION.search(text)
    return m.group(1).strip() if m else None
