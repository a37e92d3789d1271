"""A fork server that outlives the kiln process that started it, so the next `kiln` command (a fresh
process) finds torch, Triton and kiln's worker code already imported inside the sandbox instead of
waiting seconds for a new server (4.7-5.1 s of a fresh `kiln check`'s ~10 s on the H200).

Shape: a small relay process (this module, run as `python -m kiln.tools.sandbox.resident`) starts
the usual fork server (`kiln.tools.sandbox.zygote`, inside bubblewrap) on its own pipes and listens
on a Unix socket; each kiln process is a client over one connection (`Resident`, the same methods
as `Zygote`). The relay forwards a client's spawns and kills, keeps the book of which workers each
connection started, and when a connection closes (the kiln process ended, or was killed) it kills
that connection's workers that are still running. No connection and no request for `idle_s`
(`KILN_FORK_SERVER_IDLE_S`, default 600): the relay stops, and its server and workers with it.

What keeps it safe:
- Only with the full outer layer (bubblewrap with its PID namespace and Landlock in the workers):
  the socket lives in a 0700 dir of this user outside everything bubblewrap mounts, so no worker
  can see or reach it; the relay also refuses peers of another uid (SO_PEERCRED).
- Every kiln process keeps its own scratch root, nested in one per-user dir that the server mounts
  (`kiln.tools.sandbox.scratch`); Landlock still gives each worker its own dir and the paths its
  check names, so one process's workers read nothing of another's.
- A client kills only workers it started; a kill names the worker's status file too, so a pid the
  server has reaped and reused is never hit.
- The relay starts from the fork server's scrubbed environment: no secret is in its memory. It is
  keyed by everything the server depends on (Python, the bubblewrap command line and plan, the
  environment, kiln's source files and the installed torch and Triton): a change of any starts a
  new one and the old one idles out.

`KILN_FORK_SERVER=process` keeps the old per-process server (the test suite's default).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kiln.tools.sandbox import scratch
from kiln.tools.sandbox.scratch import MODE_ENV, enabled, private_dir

__all__ = ["MODE_ENV", "Resident", "connect", "eligible", "enabled", "idle_s", "private_dir", "running", "stop_all"]

IDLE_ENV = "KILN_FORK_SERVER_IDLE_S"
IDLE_S = 600.0
START_TIMEOUT_S = 180.0
REQUEST_TIMEOUT_S = 30.0
CODE_PACKAGES = ("kiln", "kiln.tools", "kiln.agents", "kiln.graphs", "kiln.evals", "kiln.rewards")
LIBRARIES = ("torch", "triton", "numpy")


def idle_s() -> float:
    try:
        return max(1.0, float(os.environ.get(IDLE_ENV, IDLE_S)))
    except ValueError:
        return IDLE_S


def eligible(box: Any) -> str:
    """'' when `box` (a kiln.tools.sandbox.box.Sandbox) can host a resident server, else why not."""
    if not enabled():
        return f"{MODE_ENV}=process"
    if box is None or not box.bwrap:
        return "needs bubblewrap's outer layer (a worker could otherwise reach the relay's socket)"
    if not box.plan.landlock or not box.plan.pidns:
        return "needs Landlock and a PID namespace in every worker"
    return ""


def socket_dir() -> Path | None:
    """Where the relays' sockets, start locks and logs live: never under what bubblewrap mounts."""
    return private_dir(scratch.base_dir() / f"kiln-rs-{os.getuid()}")


def _code_stamp() -> list:
    """Size and mtime of every kiln source file and of the installed libraries' entry files."""
    out: list = []
    for name in CODE_PACKAGES:
        spec = importlib.util.find_spec(name)
        for top in (spec.submodule_search_locations or []) if spec else []:
            for d, dirs, files in os.walk(top):
                dirs[:] = sorted(x for x in dirs if x != "__pycache__")
                for f in sorted(files):
                    if f.endswith(".py"):
                        with contextlib.suppress(OSError):
                            st = os.stat(os.path.join(d, f))
                            out.append([os.path.join(d, f), st.st_size, st.st_mtime_ns])
    for name in LIBRARIES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            with contextlib.suppress(OSError):
                st = os.stat(spec.origin)
                out.append([spec.origin, st.st_size, st.st_mtime_ns])
    return out


def visible_in(command: list[str], path: Path) -> str:
    """The host tree of a bubblewrap bind in `command` (read-only or not) that would show `path`
    inside the sandbox, '' if none (a TMPDIR inside a bound tree, say: the socket must never be
    reachable from a worker)."""
    p = os.path.realpath(path)
    for i, arg in enumerate(command):
        if arg == "--":
            break
        if arg in ("--bind", "--ro-bind", "--dev-bind") and i + 2 < len(command):
            src = os.path.realpath(command[i + 1])  # the host tree it shows
            if p == src or p.startswith(src.rstrip("/") + "/"):
                return command[i + 1]
    return ""


def server_key(command: list[str], env: dict[str, str]) -> str:
    blob = json.dumps([sys.executable, command, sorted(env.items()), _code_stamp()])
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


# ----------------------------------------------------------------------------- the relay (its own process)


def _peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


class _Relay:
    def __init__(self, zygote: subprocess.Popen, skipped: str) -> None:
        self.zygote = zygote
        self.skipped = skipped
        self.lock = threading.Lock()  # one request at a time on the server's pipes
        self.clients = 0
        self.last = time.monotonic()
        self.book_lock = threading.Lock()

    def request(self, req: dict) -> dict:
        assert self.zygote.stdin is not None and self.zygote.stdout is not None
        with self.lock:
            self.zygote.stdin.write((json.dumps(req) + "\n").encode())
            self.zygote.stdin.flush()
            line = self.zygote.stdout.readline()
        if not line:
            raise RuntimeError("the fork server died")
        return json.loads(line)

    def answer(self, req: dict, mine: dict[int, str]) -> dict:
        op = req.get("op")
        if op == "hello":
            return {"ready": True, "skipped": self.skipped, "pid": os.getpid()}
        if op == "spawn":
            resp = self.request(req)
            for pid in [p for p, st in mine.items() if os.path.exists(st)]:  # ended: forget them
                del mine[pid]
            mine[int(resp["pid"])] = str(req["status"])
            return resp
        if op == "kill":  # only a worker this connection started, named by its status file too
            pid = int(req["pid"])
            return self.request({"op": "kill", "pid": pid, "status": mine[pid]}) if pid in mine else {"ok": False}
        return {"error": f"unknown op {op!r}"}

    def serve_client(self, conn: socket.socket) -> None:
        mine: dict[int, str] = {}  # pid -> status file, of the workers this connection started
        try:
            with conn, conn.makefile("rb") as rfile:
                if _peer_uid(conn) != os.getuid():
                    return
                for line in rfile:
                    self.last = time.monotonic()
                    conn.sendall((json.dumps(self.answer(json.loads(line), mine)) + "\n").encode())
        except (OSError, ValueError, KeyError, RuntimeError):
            pass  # a broken or garbled connection ends like a closed one
        finally:
            for pid, status in mine.items():  # the client is gone: so are its workers
                if not os.path.exists(status):
                    with contextlib.suppress(OSError, ValueError, RuntimeError):
                        self.request({"op": "kill", "pid": pid, "status": status})
            with self.book_lock:
                self.clients -= 1
                self.last = time.monotonic()


def relay(sock_path: str, idle: float, command: list[str]) -> int:
    """The relay's main: start the fork server, say `ready` on stdout, serve until idle."""
    from kiln.tools.sandbox import nsutil

    with contextlib.suppress(OSError):  # as kiln's own process: no same-uid process reads its memory
        nsutil.prctl(nsutil.PR_SET_DUMPABLE, 0)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    zygote = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # noqa: S603
    assert zygote.stdout is not None
    words = zygote.stdout.readline().decode(errors="replace").split()
    if not words or words[0] != "ready":
        print("kiln resident fork server: the fork server did not start", file=sys.stderr)
        return 1
    skipped = words[1].removeprefix("skipped=") if len(words) > 1 else ""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(sock_path)  # a dead relay's (the caller holds the start lock)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(sock_path)
    finally:
        os.umask(old)
    listener.listen(64)
    listener.settimeout(0.5)
    ino = os.stat(sock_path).st_ino
    print(f"ready skipped={skipped}", flush=True)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)  # the starter stops reading after `ready`
    r = _Relay(zygote, skipped)
    try:
        while zygote.poll() is None:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                with r.book_lock:
                    if r.clients == 0 and time.monotonic() - r.last > idle:
                        break
                continue
            conn.settimeout(None)
            with r.book_lock:
                r.clients += 1
            threading.Thread(target=r.serve_client, args=(conn,), daemon=True).start()
    finally:
        with contextlib.suppress(OSError):
            if os.stat(sock_path).st_ino == ino:
                os.unlink(sock_path)
        listener.close()
        with contextlib.suppress(OSError):
            zygote.stdin.close()  # type: ignore[union-attr]  # EOF: the server kills its workers and ends
        with contextlib.suppress(subprocess.TimeoutExpired):
            zygote.wait(timeout=10)
        if zygote.poll() is None:
            zygote.kill()
    return 0


# ----------------------------------------------------------------------------- kiln's side


class Resident:
    """One kiln process's connection to a resident fork server: `Zygote`'s methods over the socket."""

    confined = True

    def __init__(self, sock_path: Path, timeout: float = 10.0) -> None:
        self.lock = threading.Lock()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(sock_path))
        self.rfile = self.sock.makefile("rb")
        hello = self._request({"op": "hello"})
        if not hello.get("ready"):
            raise RuntimeError("the resident fork server is not ready")
        self.sock.settimeout(REQUEST_TIMEOUT_S)  # a hung server fails the check that asked, never hangs it
        self.relay_pid = int(hello.get("pid") or 0)
        self.skipped = [m for m in str(hello.get("skipped") or "").split(",") if m]
        self._running: set[str] = set()
        self._dead = False

    def _request(self, req: dict) -> dict:
        with self.lock:
            try:
                self.sock.sendall((json.dumps(req) + "\n").encode())
                line = self.rfile.readline()
            except OSError as exc:
                self._dead = True
                raise RuntimeError(f"kiln's resident fork server is gone: {exc}") from exc
        if not line:
            self._dead = True
            raise RuntimeError("kiln's resident fork server is gone")
        return json.loads(line)

    def alive(self) -> bool:
        if self._dead:
            return False
        if not self.lock.acquire(blocking=False):
            return True  # a request is in flight on it
        try:
            import select

            readable, _, _ = select.select([self.sock], [], [], 0)
            if readable and not self.sock.recv(1, socket.MSG_PEEK):
                self._dead = True
        except OSError:
            self._dead = True
        finally:
            self.lock.release()
        return not self._dead

    def busy(self) -> bool:
        self._running = {p for p in self._running if not os.path.exists(p)}
        return bool(self._running) and self.alive()

    def spawn(self, entry: str, argv: list[str], *, env: dict[str, str], cwd: Path, stderr: Path, status: Path,
              as_limit: int | None, confine: dict | None = None) -> int:
        req = {"op": "spawn", "entry": entry, "argv": argv, "env": env, "cwd": str(cwd), "stderr": str(stderr),
               "status": str(status), "as_limit": as_limit, "confine": confine}
        pid = int(self._request(req)["pid"])
        self._running.add(str(status))
        return pid

    def kill(self, pid: int, status: str | Path | None = None) -> None:
        if self.alive():
            with contextlib.suppress(OSError, RuntimeError, ValueError):
                self._request({"op": "kill", "pid": pid})

    def close(self) -> None:
        """End the connection (the relay then kills the workers it started that still run)."""
        self._dead = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # the makefile's reference would keep the socket open
        with contextlib.suppress(OSError):
            self.rfile.close()
            self.sock.close()


def connect(command: list[str], env: dict[str, str]) -> Resident:
    """The resident server for this command line and environment: connected to, or started (one
    starter at a time per key: a file lock) and then connected to. Raises RuntimeError/OSError when
    neither works."""
    where = socket_dir()
    if where is None:
        raise RuntimeError("no private dir for the resident fork server's socket")
    seen = visible_in(command, where)
    if seen:
        raise RuntimeError(f"the socket's dir {where} would be visible inside the sandbox (under {seen})")
    _tidy(where)
    key = server_key(command, env)
    sock = where / f"{key}.sock"
    with contextlib.suppress(OSError, RuntimeError, ValueError):
        return Resident(sock)
    lock_path = where / f"{key}.lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        end = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > end:
                    raise RuntimeError("timed out waiting for another process to start the resident fork server") from None
                time.sleep(0.05)
        with contextlib.suppress(OSError, RuntimeError, ValueError):
            return Resident(sock)  # another process started it while we waited
        _start(sock, where / f"{key}.log", command, env)
        return Resident(sock)
    finally:
        os.close(fd)  # releases the lock


TIDY_AGE_S = 24 * 3600.0


def _tidy(where: Path) -> None:
    """Remove the start lock and log of keys whose relay is gone for a day (every kiln edit is a key)."""
    now = time.time()
    for log in where.glob("*.log"):
        with contextlib.suppress(OSError):
            if not log.with_suffix(".sock").exists() and now - log.stat().st_mtime > TIDY_AGE_S:
                log.with_suffix(".lock").unlink(missing_ok=True)
                log.unlink()


def _start(sock: Path, log: Path, command: list[str], env: dict[str, str]) -> None:
    argv = [sys.executable, "-m", "kiln.tools.sandbox.resident", str(sock), str(idle_s()), "--", *command]
    with open(log, "wb") as err:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,  # noqa: S603
                                stderr=err, start_new_session=True, close_fds=True, cwd="/")  # holds no dir busy
    assert proc.stdout is not None
    done: list[bytes] = []
    reader = threading.Thread(target=lambda: done.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(START_TIMEOUT_S)
    proc.stdout.close()
    if not done or not done[0].startswith(b"ready"):
        with contextlib.suppress(OSError):
            proc.kill()
        raise RuntimeError(f"the resident fork server did not start: {_last_line(log)}")
    _UNREAPED.append(proc)  # reaped by Popen's own bookkeeping when it ends while we still run


_UNREAPED: list[subprocess.Popen] = []


def _last_line(path: Path) -> str:
    with contextlib.suppress(OSError):
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
        return lines[-1][:300] if lines else "no output"
    return "no output"


def running() -> list[dict]:
    """The resident servers of this user that answer (for `kiln doctor`): socket, relay pid."""
    where = socket_dir()
    out = []
    for sock in sorted(where.glob("*.sock")) if where else []:
        try:
            r = Resident(sock, timeout=2.0)
        except (OSError, RuntimeError, ValueError):
            continue
        out.append({"socket": str(sock), "pid": r.relay_pid})
        r.close()
    return out


def stop_all() -> int:
    """SIGTERM every resident relay of this user that answers; how many."""
    n = 0
    for s in running():
        with contextlib.suppress(OSError):
            os.kill(int(s["pid"]), signal.SIGTERM)
            n += 1
    return n


def main(argv: list[str]) -> int:
    sock, idle, sep, *command = argv
    if sep != "--" or not command:
        print("usage: python -m kiln.tools.sandbox.resident SOCKET IDLE_S -- COMMAND...", file=sys.stderr)
        return 2
    return relay(sock, float(idle), command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
