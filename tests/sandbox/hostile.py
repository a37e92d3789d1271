"""A hostile worker: tries every escape the sandbox must stop and writes what happened to
report.json in its working directory. Run as a script (one-shot confined runs) or imported as a
candidate module (the fork server's hot path: `ModelNew` below keeps the import valid).

The targets (paths, pids, the port, the planted key) come from targets.json next to this file.
Each attempt records "ok" or the error it met; the tests decide what must have failed.
"""

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path


def attempt(fn):
    try:
        out = fn()
        return "ok" if out is None else f"ok: {str(out)[:200]}"
    except BaseException as exc:  # noqa: BLE001 - the point is to see what stops us
        return f"{type(exc).__name__}: {exc}"


def write(path):
    with open(path, "w") as f:
        f.write("written from inside the sandbox")


def read(path):
    with open(path, "rb") as f:
        return f.read(200)


def seen_key(key):
    """Does the planted key appear in any /proc/*/environ or cmdline this process can read?"""
    hits = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        for name in ("environ", "cmdline"):
            try:
                if key.encode() in Path(f"/proc/{pid}/{name}").read_bytes():
                    hits.append(f"{pid}/{name}")
            except OSError:
                pass
    return hits


def daemon(token):
    """Double-fork a `sleep` that leaves this session: it must still die with the worker."""
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.execvp("sleep", ["sleep", token])
        os._exit(0)
    os.waitpid(pid, 0)


def unix_hello(path):
    """Connect to a Unix socket and ask it for a spawn without confinement."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect(path)
    s.sendall(b'{"op": "hello"}\n')
    return s.recv(200)


def probe(targets):
    r = {"uid": os.getuid(), "pid": os.getpid(), "cwd": os.getcwd()}
    r["tcp"] = attempt(lambda: socket.create_connection(("127.0.0.1", targets["port"]), timeout=3).close())
    for name, path in targets["write"].items():
        r[f"write:{name}"] = attempt(lambda p=path: write(p))
    for name, path in targets["read"].items():
        r[f"read:{name}"] = attempt(lambda p=path: read(p))
    r["shadow"] = attempt(lambda: read("/etc/shadow"))
    r["environ"] = attempt(lambda: read(f"/proc/{targets['kiln_pid']}/environ"))
    r["key_seen"] = seen_key(targets["key"])
    for name, pid in (("kiln", targets["kiln_pid"]), ("server", targets.get("server_pid"))):
        if pid:
            r[f"signal:{name}"] = attempt(lambda p=pid: os.kill(p, 0))  # 0: would a signal reach it?
    for name, path in (targets.get("unix") or {}).items():  # a resident fork server's relay, say
        r[f"unix:{name}"] = attempt(lambda p=path: unix_hello(p))
    r["shm"] = attempt(lambda: sorted(os.listdir("/dev/shm")))
    r["kill_init"] = attempt(lambda: os.kill(1, signal.SIGKILL))  # its namespace's init
    # its own /proc files are its own (CUDA writes there: error 304 without, on the H200), its init's are not
    r["own_proc"] = attempt(lambda: Path("/proc/self/comm").write_text("hostile"))
    r["init_mem"] = attempt(lambda: open("/proc/1/mem", "r+b").close())
    r["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    status = Path("/proc/self/status").read_text()
    r["caps"] = next(ln.split()[1] for ln in status.splitlines() if ln.startswith("CapEff:"))
    r["no_new_privs"] = next(ln.split()[1] for ln in status.splitlines() if ln.startswith("NoNewPrivs:"))
    r["subprocess"] = attempt(lambda: subprocess.run(["true"], check=True))
    if targets.get("daemon"):
        r["daemon"] = attempt(lambda: daemon(targets["daemon"]))
    r["tmp"] = attempt(lambda: write(os.path.join(os.environ["TMPDIR"], "scratch.txt")))
    # a check's worker may not create files in its own dir (only in its tmp/, a scratch tmpfs kiln never
    # reads): the tests that start one as a check worker make report.json first, for it to fill
    Path("report.json").write_text(json.dumps(r))
    return r


TARGETS = Path(__file__).with_name("targets.json")
if TARGETS.exists():
    probe(json.loads(TARGETS.read_text()))
    time.sleep(float(json.loads(TARGETS.read_text()).get("linger_s", 0)))


if __name__ != "__main__":  # imported as a candidate by a check worker
    import torch.nn as nn

    class ModelNew(nn.Module):
        def forward(self, x, y):
            return x + y
