"""A fork server for check workers: one Python that has already imported torch, Triton and kiln's
worker code (but never touched CUDA) forks each worker, so a check does not pay ~1.5-2 s of imports
twice. The server itself starts from a scrubbed environment: no secret is in its memory to inherit.

Protocol (the parent is `Zygote`): one JSON line per request on the server's stdin
(`{"argv": [...], "env": {...}, "cwd": ..., "stderr": ..., "as_limit": ..., "status": ...}`), one
JSON line back with the child's pid. The child calls `setsid()`, applies the rlimits, points fds 0/1
at /dev/null and fd 2 at its stderr file, replaces its environment, and runs
`kiln.tools.check.worker.main`. When the server reaps a child it writes its wait status to the request's
`status` file, which the parent polls. EOF on stdin (the parent died) stops the server.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import subprocess
import sys
import threading
from pathlib import Path

PRELOAD = ("torch", "numpy", "triton", "triton.language", "torch.utils.flop_counter",
           "kiln.tools.check.reference", "kiln.tools.check.candidate", "kiln.tools.check.baseline",
           "kiln.tools.compile", "kiln.tools.cuda", "kiln.tools.integrity.physics", "kiln.tools.integrity.degenerate",
           "kiln.tools.integrity.runtime", "kiln.tools.timing", "kiln.tools.gpuenv")
# What every checked candidate reaches later, measured at 4-8 s of imports per worker on the H200
# machine (torch's integrity-stage dispatch machinery, the profiler, and dynamo/inductor for the
# torch.compile baseline). Some may ask the CUDA runtime for the device count at import, which
# makes torch refuse CUDA in every forked child: each is imported, then a probe child checks the
# fork is still clean, and a module that spoils it makes the server start again without it.
PRELOAD_EXTRA = ("torch.utils._python_dispatch", "torch.profiler", "torch._higher_order_ops.triton_kernel_wrap",
                 "torch._dynamo", "torch._inductor.compile_fx", "torch.utils.cpp_extension")
SKIP_ENV = "KILN_ZYGOTE_SKIP"


# ----------------------------------------------------------------------------- server (its own process)


def _child(req: dict) -> None:
    """In the forked child: contain, redirect, run the worker, never return."""
    code = 1
    try:
        sys.dont_write_bytecode = True  # the server may cache bytecode; a worker (candidate code) never
        os.setsid()
        from kiln.tools.check.isolation import _limits

        _limits(req.get("as_limit"))
        null = os.open(os.devnull, os.O_RDWR)
        err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(err, 2)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        from kiln.tools.check.worker import main

        sys.argv = ["kiln-worker", *req["argv"]]
        code = main(req["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - print and exit non-zero, like an interpreter would
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(code)


def _reap(status_files: dict[int, str]) -> None:
    while status_files:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        path = status_files.pop(pid, None)
        if path:
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            tmp = f"{path}.tmp"
            Path(tmp).write_text(str(code))
            os.replace(tmp, path)


def fork_is_clean() -> bool:
    """Would a forked child still be allowed to initialise CUDA? (torch marks children 'bad fork'
    once the parent touched the CUDA runtime, even just to count devices.)"""
    torch = sys.modules.get("torch")
    if torch is None:
        return True
    if torch.cuda.is_initialized():
        return False
    pid = os.fork()
    if pid == 0:
        bad = getattr(torch.cuda, "_is_in_bad_fork", lambda: False)()
        os._exit(3 if bad else 0)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def _preload() -> None:
    # torch answers device-count questions through NVML (fork-safe) rather than the CUDA runtime
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    for name in PRELOAD:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    if not fork_is_clean():
        sys.exit("kiln fork server: CUDA was initialised by the basic preloads; not safe to fork")
    skip = set(filter(None, os.environ.get(SKIP_ENV, "").split(",")))
    extra = os.environ.get("KILN_ZYGOTE_PRELOAD_EXTRA")  # a developer's override of the list
    for name in (extra.split(",") if extra is not None else PRELOAD_EXTRA):
        if name in skip or name in sys.modules:
            continue
        with contextlib.suppress(Exception):
            importlib.import_module(name)
        if not fork_is_clean():  # start again without it (the import cannot be undone)
            os.environ[SKIP_ENV] = ",".join(sorted(skip | {name}))
            os.execv(sys.executable, [sys.executable, "-m", "kiln.tools.check.zygote"])


def serve() -> None:
    _preload()
    out = sys.stdout
    out.write(f"ready skipped={os.environ.get(SKIP_ENV, '')}\n")
    out.flush()
    status_files: dict[int, str] = {}
    buf = b""
    while True:
        ready, _, _ = select.select([0], [], [], 0.01)
        _reap(status_files)
        if not ready:
            continue
        chunk = os.read(0, 65536)
        if not chunk:  # the parent is gone
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            req = json.loads(line)
            pid = os.fork()
            if pid == 0:
                _child(req)
            status_files[pid] = req["status"]
            out.write(json.dumps({"pid": pid}) + "\n")
            out.flush()


# ----------------------------------------------------------------------------- parent side


class Zygote:
    """A running fork server for one (device, GPU) environment."""

    def __init__(self, env: dict[str, str]) -> None:
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(  # noqa: S603
            [sys.executable, "-m", "kiln.tools.check.zygote"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, start_new_session=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode(errors="replace").split()
        if not line or line[0] != "ready":
            raise RuntimeError("kiln fork server failed to start")
        # preloads left out because importing them made forked children unable to use CUDA
        self.skipped = [m for m in line[1].removeprefix("skipped=").split(",") if m] if len(line) > 1 else []

    def alive(self) -> bool:
        return self.proc.poll() is None

    def spawn(self, argv: list[str], *, env: dict[str, str], cwd: Path, stderr: Path, status: Path,
              as_limit: int | None) -> int:
        req = {"argv": argv, "env": env, "cwd": str(cwd), "stderr": str(stderr), "status": str(status),
               "as_limit": as_limit}
        assert self.proc.stdin is not None and self.proc.stdout is not None
        with self.lock:
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
            return int(json.loads(self.proc.stdout.readline())["pid"])

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.proc.kill()
            self.proc.wait(timeout=5)


_POOL: dict[tuple, Zygote] = {}
_POOL_LOCK = threading.Lock()  # guards the two dicts; each key's own lock guards its start
_KEY_LOCKS: dict[tuple, threading.Lock] = {}


def get_zygote(key: tuple, env: dict[str, str]) -> Zygote | None:
    """The process-wide server for `key`, started on first use; None if it can't start. Servers
    for different keys (one per GPU in a batch) start side by side, not one after the other."""
    with _POOL_LOCK:
        lock = _KEY_LOCKS.setdefault(key, threading.Lock())
    with lock:
        z = _POOL.get(key)
        if z is not None and z.alive():
            return z
        try:
            z = Zygote(env)
        except (OSError, RuntimeError):
            return None
        with _POOL_LOCK:
            _POOL[key] = z
        return z


def shutdown() -> None:
    with _POOL_LOCK:
        for z in _POOL.values():
            z.close()
        _POOL.clear()


if __name__ == "__main__":
    serve()
