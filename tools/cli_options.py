"""The check's command-line options, declared once for every command that runs checks: `kiln check`,
`kiln profile`, `kiln doctor` here, and through `kiln.graphs.cli_options` `kiln run`, `kiln eval`,
`kiln model` and `kiln curriculum`.

Each flag's name, type, help and default live here once. The defaults are `CheckOptions`' own, written
out so that `--help` imports no model (tests/evals/test_startup.py checks that each equals its field).
A command whose flag means something more specific says so with `@described(flag=help)`: the same
flag (name, type, default), its own help line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

TRIALS = 2
CHECK_TIMEOUT = 300.0
DTYPE = "fp32"
ISOLATION = "best-effort"
DEVICE = "auto"
HELP_ATTR = "__kiln_flag_help__"
F = TypeVar("F", bound=Callable[..., Any])

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


def described(**helps: str) -> Callable[[F], F]:
    """A command's own help line for a shared flag whose meaning it narrows (`@described(max_iters="Coder
    rounds per op")`): the flag stays the one declared here (name, type, default); the command's loader
    (kiln.evals.cli.load_command) puts the line in its --help."""

    def mark(func: F) -> F:
        func.__dict__.setdefault(HELP_ATTR, {}).update(helps)
        return func

    return mark


def apply_help(func: Any, params: list[Any]) -> None:
    """The `described` help lines of `func`, on its click parameters (by parameter name)."""
    helps = getattr(func, HELP_ATTR, {})
    for param in params:
        if param.name in helps:
            param.help = helps[param.name]
