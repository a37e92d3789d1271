"""A fork server: one Python that has already imported what its workers need (torch, Triton, the
workers' own code: named by whoever starts it, in `KILN_ZYGOTE_PRELOAD`; it never touches CUDA)
forks each worker, so a worker does not pay seconds of imports. The server itself starts from a scrubbed environment: no secret is in its memory to inherit.
With the OS sandbox (`kiln.tools.sandbox.box`) the server runs inside bubblewrap and each worker
it forks contains itself (`kiln.tools.sandbox.confine.enter`) before any worker code runs.

Protocol (the parent is `Zygote`): one JSON line per request on the server's stdin, one JSON line
back. `{"op": "spawn", "entry": "module:function", "argv": [...], "env": {...}, "cwd": ..., "stderr": ..., "as_limit": ...,
"status": ..., "confine": {"read": [...], "write": [...]}}` answers `{"pid": N}`: N is the worker's
pid *in the server's PID namespace* (not kiln's), a handle for `{"op": "kill", "pid": N}`, which
SIGKILLs the worker and everything it started. The child points fds 0/1 at /dev/null and fd 2 at its
stderr file, takes the request's environment, contains itself, applies the rlimits and calls the
request's `entry` with its argv (the server imports no worker code of its own). When the server reaps a worker it kills what the worker left
behind and writes its exit code (or -signal) to the request's `status` file (kiln's control dir,
where no worker may write), which the parent polls. EOF on stdin (the parent died) stops the server.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

PRELOAD_ENV = "KILN_ZYGOTE_PRELOAD"
"""The modules the server imports before it serves (comma-separated, set by whoever starts it: the
server itself knows no worker's code). They must leave a forked child able to use CUDA."""
PRELOAD_EXTRA_ENV = "KILN_ZYGOTE_PRELOAD_EXTRA"
"""Further modules, each imported and then probed: some ask the CUDA runtime for the device count at
import, which makes torch refuse CUDA in every forked child, and a module that spoils the fork makes
the server start again without it (named in `ready skipped=...`)."""
SKIP_ENV = "KILN_ZYGOTE_SKIP"


# ----------------------------------------------------------------------------- server (its own process)


def _redirect(stderr: str) -> None:
    null = os.open(os.devnull, os.O_RDWR)
    err = os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.dup2(err, 2)
    os.close(null)
    os.close(err)


def _contain(req: dict, plan: Any) -> None:
    """The inner layer when the server has a plan and the request a confinement, else a new session."""
    conf = req.get("confine")
    if plan is None or conf is None:
        os.setsid()
        return
    from kiln.tools.sandbox import confine

    try:
        confine.enter(confine.Confinement.from_dict(conf), plan)
    except OSError as exc:  # never run a worker half-contained
        os.write(2, f"kiln sandbox: {exc}\n".encode(errors="replace"))
        os._exit(confine.SANDBOX_EXIT)


def _child(req: dict, plan: Any) -> None:
    """In the forked child: redirect, contain, run the worker, never return."""
    code = 1
    try:
        sys.dont_write_bytecode = True  # the server may cache bytecode; a worker (candidate code) never
        _redirect(req["stderr"])
        os.environ.clear()
        os.environ.update(req["env"])
        import tempfile

        tempfile.tempdir = None  # the server's imports cached its TMPDIR: the worker's is its own dir
        _contain(req, plan)
        from kiln.tools.sandbox.isolation import _limits

        _limits(req.get("as_limit"))
        os.chdir(req["cwd"])
        module, _, name = str(req["entry"]).partition(":")
        main = getattr(importlib.import_module(module), name)
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


class _Workers:
    """The server's book of running workers: status file and namespace init per worker pid."""

    def __init__(self, plan: Any) -> None:
        self.plan = plan
        self.status: dict[int, str] = {}
        self.init: dict[int, int | None] = {}

    def spawn(self, req: dict) -> int:
        from kiln.tools.sandbox.confine import fork_worker

        confined = self.plan is not None and req.get("confine") is not None
        pid, init = fork_worker(self.plan) if confined else (os.fork(), None)
        if pid == 0:
            _child(req, self.plan)
        self.status[pid], self.init[pid] = req["status"], init
        return pid

    def kill(self, pid: int) -> None:
        from kiln.tools.sandbox.confine import kill_worker

        if pid in self.status:
            kill_worker(pid, self.init.get(pid))

    def reap(self) -> None:
        from kiln.tools.sandbox.confine import kill_worker, wait_code, write_status

        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            path = self.status.pop(pid, None)
            if path:
                kill_worker(0, self.init.pop(pid, None))  # what it left behind dies with its namespace
                with contextlib.suppress(OSError):
                    os.killpg(pid, 9)
                with contextlib.suppress(OSError):  # its kiln process (and control dir) may be gone
                    write_status(path, wait_code(status))


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
    for name in _names(PRELOAD_ENV):
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    if not fork_is_clean():
        sys.exit("kiln fork server: CUDA was initialised by the basic preloads; not safe to fork")
    skip = set(_names(SKIP_ENV))
    for name in _names(PRELOAD_EXTRA_ENV):
        if name in skip or name in sys.modules:
            continue
        with contextlib.suppress(Exception):
            _warm(name)
        if not fork_is_clean():  # start again without it (the import cannot be undone)
            os.environ[SKIP_ENV] = ",".join(sorted(skip | {name}))
            os.execv(sys.executable, [sys.executable, "-m", "kiln.tools.sandbox.zygote", *sys.argv[1:]])


def _warm(name: str) -> None:
    """Import a module; `module:function` also calls the function (no arguments) once, for work a
    library caches in-process that every forked worker would otherwise redo (Triton's hash of its own
    files and libtriton, 0.4 s at a worker's first launch on the H200)."""
    module, _, func = name.partition(":")
    mod = importlib.import_module(module)
    if func:
        getattr(mod, func)()


def _names(var: str) -> list[str]:
    return [n for n in os.environ.get(var, "").split(",") if n]


def _handle(workers: _Workers, req: dict) -> dict:
    if req.get("op") == "kill":  # naming the worker's status file too: never a reaped pid reused by another
        pid = int(req["pid"])
        if req.get("status") is None or workers.status.get(pid) == req["status"]:
            workers.kill(pid)
        return {"ok": True}
    return {"pid": workers.spawn(req)}


def serve(argv: list[str]) -> None:
    plan = None
    if argv[:1] == ["--plan"]:
        from kiln.tools.sandbox.confine import Plan

        plan = Plan.from_json(argv[1])
        from kiln.tools.sandbox.confine import warm

        warm()  # what every worker's Landlock rules need, computed once here, not per fork
    _preload()
    out = sys.stdout
    out.write(f"ready skipped={os.environ.get(SKIP_ENV, '')}\n")
    out.flush()
    workers, buf = _Workers(plan), b""
    while True:
        ready, _, _ = select.select([0], [], [], 0.01)
        workers.reap()
        if not ready:
            continue
        chunk = os.read(0, 65536)
        if not chunk:  # the parent is gone: so are its workers
            for pid in list(workers.status):
                workers.kill(pid)
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            out.write(json.dumps(_handle(workers, json.loads(line))) + "\n")
            out.flush()


# ----------------------------------------------------------------------------- parent side


class Zygote:
    """A running fork server for one (device, GPU) environment. `command` starts it (the sandbox's
    bubblewrap command line and `--plan`); by default a plain, unconfined server."""

    def __init__(self, env: dict[str, str], command: list[str] | None = None) -> None:
        self.lock = threading.Lock()
        self.confined = command is not None
        self.log = _log_file()
        with open(self.log, "wb") as log:
            argv = command or [sys.executable, "-m", "kiln.tools.sandbox.zygote"]
            self.proc = _SPAWNER.submit(lambda: subprocess.Popen(  # noqa: S603
                argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                start_new_session=True)).result()
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode(errors="replace").split()
        if not line or line[0] != "ready":
            self.close()
            raise RuntimeError(f"kiln fork server failed to start: {_last_line(self.log)}")
        # preloads left out because importing them made forked children unable to use CUDA
        self.skipped = [m for m in line[1].removeprefix("skipped=").split(",") if m] if len(line) > 1 else []
        self._running: set[str] = set()  # status files of the workers it forked that have not ended

    def busy(self) -> bool:
        """Is a worker it forked still running? (The server writes a worker's status file when it
        reaps it.)"""
        with self.lock:
            self._running = {p for p in self._running if not os.path.exists(p)}
            return bool(self._running) and self.alive()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _request(self, req: dict) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        with self.lock:
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("kiln fork server died")
        return json.loads(line)

    def spawn(self, entry: str, argv: list[str], *, env: dict[str, str], cwd: Path, stderr: Path, status: Path,
              as_limit: int | None, confine: dict | None = None) -> int:
        """Fork a worker that runs `entry` ("module:function", called with `argv`, returning the exit
        code); its pid in the server's PID namespace (a handle for `kill`, nothing else)."""
        req = {"op": "spawn", "entry": entry, "argv": argv, "env": env, "cwd": str(cwd), "stderr": str(stderr),
               "status": str(status), "as_limit": as_limit, "confine": confine}
        pid = int(self._request(req)["pid"])
        with self.lock:
            self._running.add(str(status))
        return pid

    def kill(self, pid: int) -> None:
        """SIGKILL a worker and everything it started (through the server: its pids are not ours)."""
        if self.alive():
            with contextlib.suppress(OSError, RuntimeError, ValueError):
                self._request({"op": "kill", "pid": pid})

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.proc.kill()
            self.proc.wait(timeout=5)


# Servers are started from this one long-lived thread: bubblewrap's --die-with-parent (a parent-death
# signal) fires when the *thread* that started it ends, and a batch warms its servers from threads
# that end at once.
_SPAWNER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="kiln-fork-server-start")


def _log_file() -> Path:
    from kiln.tools.sandbox import scratch

    return scratch.ctl_dir() / f"zygote-{os.getpid()}-{time.monotonic_ns()}.log"


def _last_line(path: Path) -> str:
    with contextlib.suppress(OSError):
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
        return lines[-1][:300] if lines else "no output"
    return "no output"


_POOL: dict[tuple, Any] = {}
LAST_ERROR: list[str] = []  # why the last server failed to start
_POOL_LOCK = threading.Lock()  # guards the two dicts; each key's own lock guards its start
_KEY_LOCKS: dict[tuple, threading.Lock] = {}


def get_zygote(key: tuple, env: dict[str, str], command: list[str] | None = None, *,
               resident: bool = False) -> Any:
    """The process-wide server for `key`, started on first use; None if it can't start. Servers
    for different keys (one per GPU in a batch) start side by side, not one after the other.
    `resident`: a connection to the user's resident server for this command (started if none runs:
    kiln.tools.sandbox.resident) instead of a server of this process's own."""
    with _POOL_LOCK:
        lock = _KEY_LOCKS.setdefault(key, threading.Lock())
    with lock:
        z = _POOL.get(key)
        if z is not None and z.alive():
            return z
        try:
            if resident and command is not None:
                from kiln.tools.sandbox import resident as rs

                z = rs.connect(command, env)  # its own session: no thread's end stops it
            else:
                z = Zygote(env, command) if command is not None else Zygote(env)
        except (OSError, RuntimeError, ValueError) as exc:
            LAST_ERROR[:] = [str(exc)[:300]]
            return None
        with _POOL_LOCK:
            _POOL[key] = z
        return z


_RETIRED: list[Any] = []  # out of the pool, stopped once their last worker has ended


def retire(slot: tuple, keep: str) -> None:
    """Take the servers whose key starts with `slot` but ends in another value than `keep` (a fork
    server for a cache root the process has moved away from) out of the pool, and stop every
    retired server that has no worker running (one still serving a check is stopped later)."""
    with _POOL_LOCK:
        stale = [k for k in _POOL if k[:len(slot)] == slot and k[len(slot):] != (keep,)]
        _RETIRED.extend(_POOL.pop(k) for k in stale)
        idle = [z for z in _RETIRED if not z.busy()]
        _RETIRED[:] = [z for z in _RETIRED if z not in idle]
    for z in idle:
        z.close()


def shutdown() -> None:
    with _POOL_LOCK:
        for z in [*_POOL.values(), *_RETIRED]:
            z.close()
        _POOL.clear()
        _RETIRED.clear()


if __name__ == "__main__":
    serve(sys.argv[1:])
