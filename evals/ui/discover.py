"""Which folders under the served roots are runs (`run.json`) and which are batches
(`results.sqlite`). A batch's own runs are shown on its page, not listed again."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from kiln.evals.ui.roots import Roots

MAX_DEPTH = 6
SKIP = {".git", "node_modules", "__pycache__", ".venv", "report", "checks", "llm", "candidates", "cases"}
Kind = Literal["run", "batch"]


class Found(BaseModel):
    kind: Kind
    id: str
    path: Path


def kind_of(path: Path) -> Kind | None:
    if (path / "results.sqlite").is_file():
        return "batch"
    if (path / "run.json").is_file():
        return "run"
    return None


def _walk(root: Path) -> list[tuple[Kind, Path]]:
    out: list[tuple[Kind, Path]] = []
    base_depth = len(root.parts)
    for folder, dirs, _files in os.walk(root):
        here = Path(folder)
        kind = kind_of(here)
        if kind:
            out.append((kind, here))
            dirs[:] = []  # a run's or batch's insides are not separate entries
            continue
        if len(here.parts) - base_depth >= MAX_DEPTH:
            dirs[:] = []
        dirs[:] = sorted(d for d in dirs if d not in SKIP and not d.startswith("."))
    return out


def discover(roots: Roots) -> list[Found]:
    found: list[Found] = []
    for root in roots.folders:
        for kind, path in _walk(root):
            found.append(Found(kind=kind, id=roots.id_of(path), path=path))
    return found


def mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def signature(found: list[Found]) -> tuple:
    """Changes whenever any listed run or batch writes something the runs page shows."""
    names = {"run": ("events.jsonl", "summary.json"), "batch": ("results.sqlite-wal", "results.sqlite", "metrics.json")}
    return tuple((f.id, *(mtime(f.path / n) for n in names[f.kind])) for f in found)
