"""Find the problems of a batch: a KernelBench checkout (levels, ids) or any folder of problem files.

Problem files are used as they are: kiln never rewrites or copies them.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from kiln.tools.errors import KilnInputError
from kiln.tools.records import JSON_SAFE

_KB_NAME = re.compile(r"^(\d+)_(.+)\.py$")


class ProblemRef(BaseModel):
    model_config = ConfigDict(**JSON_SAFE, frozen=True)

    key: str  # stable id in the store, e.g. "level1/23_Softmax" or "softmax"
    path: str
    level: int | None = None
    pid: int | None = None
    sha256: str = ""


def parse_ids(spec: str | None) -> set[int] | None:
    """'1-20,23' -> {1..20, 23}; None -> all."""
    if not spec:
        return None
    ids: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not match:
            raise KilnInputError(f"bad --problems item {part!r}: use ids and ranges like 1-20,23")
        lo, hi = int(match[1]), int(match[2] or match[1])
        if hi < lo:
            raise KilnInputError(f"bad --problems range {part!r}: end before start")
        ids.update(range(lo, hi + 1))
    return ids


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def kernelbench_problems(root: Path, levels: list[int], ids: set[int] | None) -> list[ProblemRef]:
    """Problems of a local KernelBench clone: ROOT/KernelBench/level{N}/<id>_<Name>.py."""
    base = root / "KernelBench"
    if not base.is_dir():
        raise KilnInputError(f"{root} is not a KernelBench checkout: no KernelBench/ folder in it")
    if 4 in levels:
        raise KilnInputError("level 4 (Hugging Face models that download weights) is out of scope for kiln")
    found: list[ProblemRef] = []
    for level in sorted(set(levels)):
        folder = base / f"level{level}"
        if not folder.is_dir():
            raise KilnInputError(f"no {folder.relative_to(root)} in {root}")
        for path in folder.glob("*.py"):
            match = _KB_NAME.match(path.name)
            if not match or (ids is not None and int(match[1]) not in ids):
                continue
            found.append(ProblemRef(key=f"level{level}/{path.stem}", path=str(path.resolve()),
                                    level=level, pid=int(match[1]), sha256=_sha(path)))
    found.sort(key=lambda p: (p.level or 0, p.pid or 0))
    if not found:
        raise KilnInputError(f"no problems matched in {base} (levels {levels}, ids {sorted(ids) if ids else 'all'})")
    return found


def folder_problems(folder: Path, ids: set[int] | None = None) -> list[ProblemRef]:
    """Every problem file (`*.py` with a `class Model`) in a folder, or one file."""
    if not folder.exists():
        raise KilnInputError(f"no such file or folder: {folder}")
    paths = [folder] if folder.is_file() else sorted(folder.glob("*.py"))
    refs = []
    for path in paths:
        if "class Model" not in path.read_text(errors="replace"):
            continue
        match = _KB_NAME.match(path.name)
        pid = int(match[1]) if match else None
        if ids is not None and pid not in ids:
            continue
        refs.append(ProblemRef(key=path.stem, path=str(path.resolve()), pid=pid, sha256=_sha(path)))
    if not refs:
        raise KilnInputError(f"no problem files (with a `class Model`) in {folder}")
    return refs
