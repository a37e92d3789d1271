"""Option errors in the user's terms: a pydantic error on `budgets.max_iters` becomes
`--max-iters must be >= 1 (got 0)`, one wording for every command.

`kiln run` and `kiln eval` build their options through the same models (`LoopOptions`, and the
batch config holding one); `kiln check`'s are `CheckOptions`. One table maps model fields to flags
for all of them. `writable(...)`: an output path that cannot be written is refused in one line before
any work. No LLM, graph or pydantic imports at start-up: any layer may use it, at any point.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kiln.tools.errors import KilnInputError

if TYPE_CHECKING:
    from pydantic import ValidationError

# a model field path (dots) -> the flag a user types; fields not listed map by name (x_y -> --x-y)
FLAGS: dict[str, str] = {
    "budgets.max_iters": "--max-iters",
    "budgets.usd": "--budget-usd",
    "budgets.tokens": "--budget-tokens",
    "budgets.minutes": "--budget-minutes",
    "budgets.no_progress_iters": "--no-progress",
    "check.timeout_s": "--check-timeout",
    "check.trials": "--trials",
    "check.dtype": "--dtype",
    "check.seed": "--seed",
    "check.device": "--device",
    "check.isolation": "--isolation",
    "check.bwrap": "--bwrap",
    "roles.llm": "--llm",
    "roles.coder_llm": "--coder-llm",
    "roles.judge_llm": "--judge-llm",
    "roles.proposer_llm": "--proposer-llm",
    "roles.base_url": "--base-url",
}


def flag_for(loc: tuple[Any, ...]) -> str:
    path = ".".join(str(p) for p in loc if not isinstance(p, int))
    for prefix in ("run.", "loop."):  # the batch config nests the run's options
        path = path.removeprefix(prefix)
    if path in FLAGS:
        return FLAGS[path]
    return "--" + path.split(".")[-1].removesuffix("_s").replace("_", "-")


def _rule(err: dict[str, Any]) -> str:
    ctx, kind = err.get("ctx") or {}, err["type"]
    bounds = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}
    for key, sign in bounds.items():
        if kind == key:
            bound = next(iter(ctx.values()))
            bound = int(bound) if isinstance(bound, float) and bound.is_integer() else bound
            return f"must be {sign} {bound}"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected', '').replace(' or ', ', ')}".replace("'", "")
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return "must be a whole number"
    if kind in ("float_parsing", "float_type"):
        return "must be a number"
    if kind == "extra_forbidden":
        return "is not an option of this command"
    return err["msg"][0].lower() + err["msg"][1:]


def flag_error(err: ValidationError) -> str:
    """The first error, as `--flag must be ... (got VALUE)`; more errors are counted, not listed."""
    first = err.errors()[0]
    got = first.get("input")
    shown = "" if isinstance(got, dict) or first["type"] == "missing" else f" (got {got!r})"
    more = f"; and {len(err.errors()) - 1} more" if len(err.errors()) > 1 else ""
    return f"{flag_for(tuple(first['loc']))} {_rule(dict(first))}{shown}{more}"


def _existing_parent(path: Path) -> Path:
    """The nearest ancestor of `path` that exists (the current folder for a relative name)."""
    for parent in path.absolute().parents:
        if parent.exists():
            return parent
    return Path("/")


def _probe(folder: Path) -> str | None:
    """Why a new file cannot be made in `folder`, or None. Tried for real (root passes os.access
    everywhere, /proc refuses anyway): a hidden empty file made and removed at once."""
    if not folder.is_dir():
        return f"{folder} is a file, not a folder"
    try:
        fd, name = tempfile.mkstemp(prefix=".kiln-write-probe-", dir=folder)
    except OSError as err:
        return f"cannot create files in {folder}: {err.strerror or err}"
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(name)
    return None


def writable(path: Path | str | None, flag: str, *, folder: bool = False) -> None:
    """Refuse, as `FLAG PATH: cannot write there (why)`, an output kiln could not write at the end
    (`--out /proc/1/x`, `--out` under a regular file, a read-only disk). `folder`: PATH is a directory
    kiln will create or fill; else a file. Creates nothing it leaves behind. Call it before any work."""
    if path is None:
        return
    path = Path(path)
    why = None
    if path.exists():
        if folder and not path.is_dir():
            why = "it is a file, not a folder"
        elif not folder and path.is_dir():
            why = "it is a folder, not a file"
        elif folder:
            why = _probe(path)
        elif not os.access(path, os.W_OK):
            why = "the file is read-only"
    else:
        why = _probe(_existing_parent(path))
    if why:
        raise KilnInputError(f"{flag} {path}: cannot write there ({why})")
