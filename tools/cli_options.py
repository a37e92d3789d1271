"""The check's command-line options, declared once for every command that runs checks: `kiln check`,
`kiln profile`, `kiln doctor` here, and through `kiln.graphs.cli_options` `kiln run`, `kiln eval`,
`kiln model` and `kiln curriculum`.

Each flag's name, type, help and default live here once. The defaults are `CheckOptions`' own, written
out so that `--help` imports no model (tests/evals/test_startup.py checks that each equals its field).
A command whose flag means something more specific says so with `described(Flag, help)`: the same
flag (name, type), its own help line.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any, get_args

import typer

TRIALS = 2
CHECK_TIMEOUT = 300.0
DTYPE = "fp32"
ISOLATION = "best-effort"
DEVICE = "auto"

Device = Annotated[str, typer.Option(help="auto | cuda | cpu")]
Dtype = Annotated[str, typer.Option(help="fp32 | bf16 | fp16: the dtype every check runs the problem in")]
Trials = Annotated[int, typer.Option(help="correctness trials per case and basic input distribution (the wide "
                                          "distributions get half, at least one)")]
CheckTimeout = Annotated[float, typer.Option("--check-timeout", "--timeout",
                                             help="seconds per check (its stages share them)")]
Seed = Annotated[int | None, typer.Option(help="fixed input seed (default: a fresh secret one per check)")]
Isolation = Annotated[str, typer.Option(help="strict (refuse without the full OS sandbox) | best-effort: the "
                                             "sandbox of every check")]
Bwrap = Annotated[str | None, typer.Option(help="bubblewrap binary or unpacked .deb folder (default: on PATH)")]


def described(flag: Any, help_: str) -> Any:
    """`flag` (an `Annotated[type, typer.Option(...)]` above) with a command's own help line."""
    kind, info = get_args(flag)
    mine = copy.copy(info)
    mine.help = help_
    return Annotated[kind, mine]
