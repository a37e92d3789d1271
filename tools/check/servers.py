"""The process-wide fork servers of a kiln process: one per (device, GPU), started on first use
(or warmed in the background by a batch), each forking the check workers for that device."""

from __future__ import annotations

import importlib
import os
import sys
import threading
from pathlib import Path
from typing import Any

from kiln.tools import pyparse
from kiln.tools.sandbox.isolation import scrubbed_env
from kiln.tools.sandbox.zygote import PRELOAD_ENV, PRELOAD_EXTRA_ENV

PRELOAD = ("torch", "numpy", "triton", "triton.language", "torch.utils.flop_counter",
           "kiln.tools.check.worker", "kiln.tools.check.reference", "kiln.tools.check.candidate",
           "kiln.tools.check.baseline", "kiln.tools.compile", "kiln.tools.cuda", "kiln.tools.integrity.physics",
           "kiln.tools.integrity.degenerate", "kiln.tools.integrity.runtime", "kiln.tools.timing", "kiln.tools.gpuenv")
"""What the check's fork server imports before it serves: every worker role's code."""
PRELOAD_EXTRA = ("torch.utils._python_dispatch", "torch.profiler", "torch._higher_order_ops.triton_kernel_wrap",
                 "torch._dynamo", "torch._inductor.compile_fx", "torch.utils.cpp_extension",
                 "triton.runtime.cache:triton_key")
"""What every checked candidate reaches later, measured at 4-8 s of imports per worker on the H200
machine (torch's integrity-stage dispatch machinery, the profiler, and dynamo/inductor for the
torch.compile baseline); each is probed by the server (`kiln.tools.sandbox.zygote`)."""
TIMING_ONLY = ("torch._inductor.compile_fx", "triton.runtime.cache:triton_key")
"""Only where kiln times (a GPU) does a worker build the torch.compile baseline: a CPU server leaves
inductor (~1.8 s of its start on CI's machine) to the rare worker that imports it. Dynamo stays:
the integrity stage imports it, and leaving it out cost every CPU worker 1.5 s. Triton's key (a hash
of libtriton) is asked for only when a kernel compiles, which Triton's CPU interpreter never does."""


def fork_server_for(device: str, gpu_index: int, cache_root: Path, box: Any = None, *, preimport: bool = True) -> Any:
    """The fork server for this device (None: workers start as fresh interpreters), inside the
    sandbox `box` (kiln.tools.sandbox.box.Sandbox) when given; with `preimport`, the parent's own
    check modules are imported in the background too."""
    from kiln.tools.sandbox import zygote
    from kiln.tools.sandbox.zygote import get_zygote, retire

    if preimport:
        _preimport_parent()
    env = zygote_env(device, gpu_index, cache_root)
    # A server is bound to its cache root: its environment points the workers' caches there and its
    # bubblewrap mounts only that root's dirs. A process that moves KILN_CACHE_DIR gets a new server
    # for the new root; the old root's server takes no more work and stops once its workers end.
    slot = (device, gpu_index, sys.executable, box.key if box is not None else None)
    retire(slot, keep=str(cache_root))
    if box is None:
        return get_zygote((*slot, str(cache_root)), env)
    from kiln.tools.sandbox.box import server_mounts

    server = [sys.executable, "-m", "kiln.tools.sandbox.zygote"]
    key = (*slot, str(cache_root))
    shared = _resident_dir(box) if key not in _NO_RESIDENT else None
    if shared is not None:  # one server for every kiln process of this user (kiln.tools.sandbox.resident)
        command = box.server_command(server, env=env, write=server_mounts(cache_root, shared))
        z = get_zygote(key, env, command, resident=True)
        if z is not None:
            return z
        _NO_RESIDENT.add(key)
        why = zygote.LAST_ERROR[-1] if zygote.LAST_ERROR else "unknown"
        _say_once(f"kiln: warning: no resident fork server ({why}); this process starts its own")
    command = box.server_command(server, env=env, write=server_mounts(cache_root))
    return get_zygote(key, env, command)


_NO_RESIDENT: set[tuple] = set()  # keys whose resident server failed in this process: its own from then on
_SAID: set[str] = set()


def _say_once(line: str) -> None:
    if line not in _SAID:
        _SAID.add(line)
        print(line, file=sys.stderr)


def _resident_dir(box: Any) -> Path | None:
    """The shared scratch dir a resident server mounts, when this process may use one."""
    from kiln.tools.sandbox import resident, scratch

    if resident.eligible(box):
        return None
    shared = scratch.shared_dir()
    root = scratch.root()
    return shared if shared is not None and root.parent == shared else None


def warm_fork_servers(device: str, gpu_indices: list[int], cache_root: Path, box: Any = None, *,
                      preimport: bool = True) -> list[threading.Thread]:
    """Start the fork servers of these GPUs now, side by side, in background threads: a batch's
    first checks then find them running instead of each waiting seconds for its own."""
    threads = [threading.Thread(target=fork_server_for, args=(device, g, cache_root, box),
                                kwargs={"preimport": preimport}, daemon=True) for g in gpu_indices]
    for t in threads:
        t.start()
    return threads


def warm_for(device: str, options: Any, *, preimport: bool = True) -> list[threading.Thread]:
    """A command's first check will need this device's fork server: start it now, in the background,
    so its seconds of imports (torch, Triton, inside the sandbox) overlap what the command does
    first (loading the problem, the static scan, the Coder's first reply). The check finds it
    running, or waits for this same start. `options`: the check's CheckOptions (fork server, GPU,
    isolation). `preimport=False` leaves the parent's own torch import to the check: that import holds
    the parse lock (`pyparse`) for its seconds, and `kiln check` parses the problem and the candidate
    next (1-2 s of waiting in a fresh process)."""
    from kiln.tools.check import caches
    from kiln.tools.errors import KilnConfigError
    from kiln.tools.sandbox.box import sandbox_for

    if not options.fork_server:
        return []
    try:
        box = sandbox_for(options.isolation, options.bwrap)
    except KilnConfigError:  # strict isolation without a full sandbox: the check itself says so
        return []
    return warm_fork_servers(device, [options.gpu_index], caches.root(), box, preimport=preimport)


def zygote_env(device: str, gpu_index: int, cache_root: Path) -> dict[str, str]:
    """The fork server's environment: a worker's, except that the server (kiln's and torch's code
    only) may write the bytecode cache, so its next start does not compile torch's Python again
    where an install shipped none; the workers it forks write none (`zygote._child`)."""
    home = cache_root / "zygote" / "home"
    home.mkdir(parents=True, exist_ok=True)
    # never the user's HOME or TMPDIR: libraries compute paths from them at import (Triton's ~/.triton),
    # and the workers the server forks inherit what the imports computed
    env = scrubbed_env(device=device, gpu_index=gpu_index, cache_dir=cache_root / "zygote",
                       extra={"HOME": str(home), "TMPDIR": str(home)})
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not _ships_bytecode():
        # the H200 image's torch has no bytecode, and the sandbox mounts it read-only: every server start
        # compiled ~1,500 of its modules (~10 s). Kept in kiln's own cache instead, which only the server
        # and kiln's trusted workers (baseline, peaks) may write; candidates' workers write none
        env["PYTHONPYCACHEPREFIX"] = str(cache_root / "zygote" / "pycache")
    extra = os.environ.get(PRELOAD_EXTRA_ENV)  # a developer's override of the list
    if extra is None:
        extra = ",".join(n for n in PRELOAD_EXTRA if device != "cpu" or n not in TIMING_ONLY)
    env.update({PRELOAD_ENV: ",".join(PRELOAD), PRELOAD_EXTRA_ENV: extra})
    return env


def _ships_bytecode() -> bool:
    """Does the installed torch come with its bytecode (pip compiles it at install; some images don't)?"""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return True
    return os.path.exists(importlib.util.cache_from_source(spec.origin))


PARENT_MODULES = ("kiln.tools.check.session", "kiln.tools.check.timing", "kiln.tools.check.merge",
                  "kiln.tools.integrity.verdict", "kiln.tools.integrity.runtime_rules")
"""What kiln's own process runs a check with. None of it imports torch: the workers hold every tensor
and the reference's worker judges outputs, so a fresh `kiln check` on the resident fork server never
waits for torch's import (`tests/core/test_parent_torch_free.py`)."""


def _preimport_parent() -> None:
    """Import the parent's check modules in a thread while the workers start, not after."""
    if not all(m in sys.modules for m in PARENT_MODULES):
        threading.Thread(target=_import_parent_modules, daemon=True).start()


def _import_parent_modules() -> None:
    with pyparse.LOCK:  # an import may compile source: never beside another thread's parse
        for name in PARENT_MODULES:
            importlib.import_module(name)
