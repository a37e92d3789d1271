"""Two file chores done one way: writing a file atomically, and importing a module from a file.

Standard library only: the check's workers (forked from a server that preloads
`kiln.tools.check.worker`, which imports this) and the stress-case runner use it too.
"""

from __future__ import annotations

import importlib.util
import os
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
