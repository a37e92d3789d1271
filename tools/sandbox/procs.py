"""The two kinds of worker process an `IsolatedProc` drives, with the bits of Popen it uses: one
forked by the fork server (`Forked`: polls and kills go through the server, whose pids are not
kiln's when it is sandboxed) and one exec'd by kiln (`Popened`: through the sandbox's one-shot
launcher when there is one, its exit code coming back through a pipe)."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

ENV_NOFILE = 4096
FSIZE_BYTES = 4 << 30
"""No file a worker writes grows past this (SIGXFSZ, then EFBIG): its outputs are at most a 64 Mi-
element tensor's bytes, a built extension tens of MB."""


def _limits(as_limit_bytes: int | None) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    cap = ENV_NOFILE if hard == resource.RLIM_INFINITY else min(ENV_NOFILE, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (cap, hard))
    _soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    fsize = FSIZE_BYTES if hard == resource.RLIM_INFINITY else min(FSIZE_BYTES, hard)
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    if as_limit_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (as_limit_bytes, as_limit_bytes))


def pid_alive(pid: int) -> bool:
    """Is a process with this pid alive (ours or not)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_code(path: Path | None) -> int | None:
    try:
        return int(Path(path).read_text()) if path else None
    except (OSError, ValueError):
        return None


def _status_path() -> Path:
    """Where a worker's exit code is written: kiln's control dir, which no worker may write."""
    from kiln.tools.sandbox import scratch

    return scratch.ctl_dir() / f"{os.getpid()}.{time.monotonic_ns()}.status"


class Forked:
    """A worker forked by the fork server (kiln.tools.sandbox.zygote), with the bits of Popen we use.
    Its pid is the server's (another PID namespace when sandboxed): polls and kills go through the
    server, never through os.kill here."""

    def __init__(self, zygote: Any, entry: str, argv: list[str], env: dict[str, str], cwd: Path, stderr: Path,
                 as_limit: int | None, confine: dict | None) -> None:
        self.zygote = zygote
        self.returncode: int | None = None
        self.status = _status_path()
        self.pid = zygote.spawn(entry, argv, env=env, cwd=cwd, stderr=stderr, status=self.status, as_limit=as_limit,
                                **({"confine": confine} if confine is not None else {}))

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = _read_code(self.status)
            if self.returncode is None and not self.zygote.alive():
                if not getattr(self.zygote, "confined", False) and pid_alive(self.pid):
                    return None  # an unconfined worker may outlive its server; its pid is ours
                self.returncode = -signal.SIGKILL  # the server (and its namespace) is gone
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = time.monotonic() + (timeout if timeout is not None else 1e9)
        while self.poll() is None:
            if time.monotonic() > end:
                raise subprocess.TimeoutExpired("worker", timeout or 0)
            time.sleep(0.005)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if self.returncode is not None:
            return  # reaped: the server already killed what it left behind
        self.zygote.kill(self.pid)
        if not getattr(self.zygote, "confined", False):
            _killpg(self.pid)  # an unconfined server shares our pids: make sure


class Popened:
    """A worker exec'd by kiln itself, through the sandbox's one-shot launcher when there is one:
    then its exit code, or -signal, comes through a pipe (`status_fd`) from the launcher."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, stderr: Path, as_limit: int | None,
                 sandbox: Any = None, confinement: Any = None) -> None:
        self.status_r: int | None = None
        fds: tuple[int, ...] = ()
        if sandbox is not None and confinement is not None:
            self.status_r, w = os.pipe()
            os.set_blocking(self.status_r, False)
            fds = (w,)
            argv = sandbox.command(argv, confinement, env=env, cwd=str(cwd), status_fd=w)
        try:
            with open(stderr, "wb") as err, open(os.devnull, "wb") as out:
                self.popen = subprocess.Popen(  # noqa: S603 - argv is ours, the candidate is a file it reads
                    argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, pass_fds=fds,
                    start_new_session=True, preexec_fn=lambda: _limits(as_limit),
                )
        finally:
            for fd in fds:
                os.close(fd)
        self.pid = self.popen.pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and self.popen.poll() is not None:
            code = self._status()
            self.returncode = code if code is not None else self.popen.returncode
        return self.returncode

    def _status(self) -> int | None:
        if self.status_r is None:
            return None
        try:
            return int(os.read(self.status_r, 64) or b"x")
        except (OSError, ValueError):
            return None
        finally:
            os.close(self.status_r)
            self.status_r = None

    def wait(self, timeout: float | None = None) -> int:
        self.popen.wait(timeout)
        rc = self.poll()
        assert rc is not None
        return rc

    def kill(self) -> None:
        _killpg(self.pid)


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:  # killed before its setsid(): no group yet
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    except PermissionError:
        pass


