"""File chores done one way: writing a file atomically, importing a module from a file, removing a
tree a worker wrote.

Standard library only: the check's workers (forked from a server that preloads
`kiln.tools.check.worker`, which imports this) and the stress-case runner use it too.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import stat
import sys
import threading
from pathlib import Path
from types import ModuleType


def write_atomic(path: Path | str, data: str | bytes) -> None:
    """Write `data` to `path` through a temporary file beside it and a rename, so that a reader sees
    the old file or the new one, never a half-written one. The temporary name is this process's and
    this thread's own, so parallel writers of one path never share it. The folder must exist."""
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "wb" if isinstance(data, bytes) else "w") as fh:
        fh.write(data)
    os.replace(tmp, path)


def load_module(path: Path | str, name: str, *, register: bool = True) -> ModuleType:
    """Import a Python file as module `name`; `register` puts it in `sys.modules` first (what a
    module that pickles its own classes, or imports itself by name, needs)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


_PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(path: Path | str, max_dirs: int = 100_000) -> None:
    """Remove a tree a worker wrote (a check's work dir, a candidate's compile cache), whatever modes
    the worker left on its folders: each folder first gets its owner's rwx back (a worker may chmod
    what its uid owns, and a folder it made 000 would otherwise stay behind). No link is followed:
    each folder is reached from its parent's descriptor and changed through its own
    (`/proc/self/fd/N`), so a folder swapped for a link changes nothing outside."""
    with contextlib.suppress(OSError):
        _unlock(os.open(path, _PATH_FLAGS), max_dirs)
    shutil.rmtree(path, ignore_errors=True)


def _unlock(top: int, max_dirs: int) -> None:
    """u+rwx on the folder `top` (an O_PATH descriptor, closed here) and every folder beneath it."""
    stack, seen = [top], 0
    while stack and seen < max_dirs:
        fd = stack.pop()
        seen += 1
        try:
            st = os.fstat(fd)
            if not stat.S_ISDIR(st.st_mode):
                continue
            here = f"/proc/self/fd/{fd}"
            if st.st_mode & 0o700 != 0o700:
                os.chmod(here, stat.S_IMODE(st.st_mode) | 0o700)
            with os.scandir(here) as it:
                names = [e.name for e in it if e.is_dir(follow_symlinks=False)]
            for name in names:
                with contextlib.suppress(OSError):
                    stack.append(os.open(f"{here}/{name}", _PATH_FLAGS))
        except OSError:
            continue
        finally:
            os.close(fd)
    for fd in stack:
        os.close(fd)
