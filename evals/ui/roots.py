"""The folders `kiln ui` serves, and the one resolver that turns a URL id into a path inside them.

An id is `<root index>/<path relative to that root>` (`0/runs/softmax-1`). Anything that resolves
outside its root (`..`, an absolute path, a symbolic link pointing out) is refused; `read_text`
refuses files too large to be a record. Which files the viewer shows at all is `files.is_recorded`:
only those a run's or a batch's records name."""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

from kiln.tools.errors import KilnInputError

MAX_TEXT_BYTES = 4 * 1024 * 1024  # no record, source or log kiln writes is near this


class Refused(Exception):
    """A path outside the served folders, or not a file the UI serves (the server answers 404)."""


class Roots:
    def __init__(self, folders: list[Path]) -> None:
        if not folders:
            raise KilnInputError("kiln ui: give at least one folder to serve")
        missing = [str(f) for f in folders if not Path(f).is_dir()]
        if missing:
            raise KilnInputError(f"kiln ui: not a folder: {', '.join(missing)}")
        self.folders = [Path(f).resolve() for f in folders]

    def id_of(self, path: Path) -> str:
        path = path.resolve()
        for i, root in enumerate(self.folders):
            if path == root or root in path.parents:
                rel = path.relative_to(root).as_posix()
                return f"{i}/{rel}" if rel != "." else f"{i}/."
        raise Refused(str(path))

    def resolve(self, rid: str) -> Path:
        """The folder or file an id names; `Refused` unless it lies inside its root."""
        head, _, rest = rid.partition("/")
        if not head.isdigit() or int(head) >= len(self.folders):
            raise Refused(rid)
        root = self.folders[int(head)]
        rel = PurePosixPath(rest or ".")
        if rel.is_absolute() or ".." in rel.parts or "\\" in rest or "\x00" in rest:
            raise Refused(rid)
        path = (root / rel).resolve()
        if path != root and root not in path.parents:
            raise Refused(rid)
        return path


def inside(base: Path, rel: str) -> Path:
    """`base/rel`, refused unless it stays inside `base` once links are resolved."""
    pure = PurePosixPath(rel)
    if not rel or pure.is_absolute() or ".." in pure.parts or "\\" in rel or "\x00" in rel:
        raise Refused(rel)
    path = (base / pure).resolve()
    if base.resolve() not in path.parents:
        raise Refused(rel)
    return path


def read_text(path: Path, limit: int = MAX_TEXT_BYTES) -> str | None:
    """A file's text, or None when missing; oversized or binary files are refused."""
    try:
        size = path.stat().st_size
    except OSError:
        return None
    if size > limit:
        return f"(file not shown: {size} bytes)"
    data = path.read_bytes()
    if b"\x00" in data[:4096]:
        return "(binary file not shown)"
    return data.decode("utf-8", errors="replace")


_JSON_CACHE: dict[Path, tuple[tuple[int, int], object]] = {}


def read_json(path: Path) -> object | None:
    """Parsed JSON, cached by (mtime, size): live pages re-read runs every second."""
    try:
        st = path.stat()
    except OSError:
        return None
    key = (st.st_mtime_ns, st.st_size)
    hit = _JSON_CACHE.get(path)
    if hit and hit[0] == key:
        return hit[1]
    text = read_text(path)
    try:
        value = json.loads(text) if text else None
    except ValueError:
        value = None
    if len(_JSON_CACHE) > 20_000:
        _JSON_CACHE.clear()
    _JSON_CACHE[path] = (key, value)
    return value
