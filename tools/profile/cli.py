"""`kiln profile`: profile a candidate on the GPU, or analyze an existing Nsight Compute report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kiln.tools import cli_options as o
from kiln.tools.errors import KilnInputError
from kiln.tools.flags import writable


@o.described(isolation="the profiled program's OS sandbox: strict (refuse without the full sandbox) | "
                       "best-effort")
def profile(
    problem: Annotated[Path | None, typer.Argument(help="problem file (KernelBench format)")] = None,
    candidate: Annotated[Path | None, typer.Argument(help="candidate file (ModelNew)")] = None,
    device: Annotated[str, typer.Option(help="cuda (profile on the GPU) or cpu (compile-only SASS)")] = "cuda",
    level: Annotated[str, typer.Option(help="quick: SOL, launch, occupancy, warp state; full: + memory, compute, source")] = "quick",
    dtype: o.Dtype = o.DTYPE,
    rung: Annotated[str | None, typer.Option("--rung", help="force a rung: ncu | torch_profiler | static")] = None,
    import_: Annotated[Path | None, typer.Option("--import", help="analyze an existing .ncu-rep or ncu CSV")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the full report as JSON")] = None,
    isolation: o.Isolation = o.ISOLATION,
    bwrap: o.Bwrap = None,
) -> None:
    """Profile a candidate (ncu counters where allowed, else the torch profiler) and print the Judge's digest."""
    from kiln.tools.profile.api import import_report, profile_candidate  # noqa: PLC0415 - keep CLI start fast
    from kiln.tools.profile.render import render_digest  # noqa: PLC0415

    if level not in {"quick", "full"}:
        raise KilnInputError(f"--level must be quick or full, not '{level}'")
    if isolation not in {"strict", "best-effort"}:
        raise KilnInputError(f"--isolation must be strict or best-effort, not '{isolation}'")
    if dtype not in {"fp32", "bf16", "fp16"}:
        raise KilnInputError(f"--dtype must be fp32, bf16 or fp16, not '{dtype}'")
    writable(json_out, "--json")
    if import_ is not None:
        report = import_report(import_, dtype=dtype)
    elif problem is None or candidate is None:
        raise KilnInputError("give PROBLEM and CANDIDATE, or --import REPORT")
    else:
        report = profile_candidate(problem, candidate, level=level, device=device, force_rung=rung, dtype=dtype,
                                   isolation=isolation, bwrap=bwrap)
    typer.echo(render_digest(report))
    if json_out is not None:
        json_out.write_text(report.model_dump_json(indent=1))
        typer.echo(f"full report: {json_out}")
