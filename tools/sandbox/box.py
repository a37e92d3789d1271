"""The OS sandbox for LLM-written code: the outer layer (bubblewrap), the level in force, the record.

Two layers contain every worker (candidates, references, baselines, the Proposer's case modules,
the profiler's targets):

* **outer**, bubblewrap (`bwrap`), once per fork server or one-shot run: an allowlist of mounts, not
  `/` — the system dirs read-only (unreadable files of /etc masked), Python's prefixes and
  site-packages, kiln's source and the toolchain dirs read-only, a fresh /proc, /sys read-only, a
  minimal /dev (null, zero, random and the GPU's nodes), tmpfs /tmp and /dev/shm, and read-write
  only what the caller names (kiln's scratch root, the candidates' compile caches). Never $HOME,
  the project, run dirs or kiln's other caches. Own user (uid 65534), PID, network, IPC, UTS and
  cgroup namespaces, `--die-with-parent`, a new session, the scrubbed environment only; of all
  capabilities only CAP_SYS_ADMIN inside its own user namespace, which the fork server needs to
  give each worker its own namespaces.
* **inner**, per worker (`kiln.tools.sandbox.confine`): own PID/mount/net/IPC/user namespaces, fresh
  /proc, no capabilities, no_new_privs, Landlock.

`--isolation strict` refuses to run unless every layer is in force; `best-effort` uses what works
and says so, once per process on stderr and in every check record (`IsolationRecord`). The probe
runs once per kiln process and bubblewrap binary: a confined child reports which steps worked.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from kiln.tools.errors import KilnConfigError
from kiln.tools.records import IsolationRecord
from kiln.tools.sandbox import confine, nsutil, scratch
from kiln.tools.sandbox.confine import Confinement, Plan

ALWAYS = ["new-session", "pdeathsig", "no-capabilities", "no-new-privs", "closed-fds"]
ALL_LAYERS = ["bwrap", "pid-namespace", "mount-namespace", "net-namespace", "ipc-namespace", "user-namespace",
              *ALWAYS, "landlock-fs", "landlock-tcp", "landlock-scope", "kiln-non-dumpable"]
PROBE_TIMEOUT_S = 60.0
_WARNED: set[str] = set()
_LOCK = threading.Lock()


# ----------------------------------------------------------------------------- bubblewrap


def find_bwrap(configured: str | None) -> tuple[str | None, str]:
    """(path, '') of the bubblewrap binary, or (None, why not)."""
    if configured:
        path = Path(configured).expanduser()
        if path.is_dir():
            path = path / "bwrap" if (path / "bwrap").exists() else path / "usr" / "bin" / "bwrap"
        ok = path.is_file() and os.access(path, os.X_OK)
        return (str(path), "") if ok else (None, f"no bubblewrap binary at {configured}")
    found = shutil.which("bwrap")
    return (found, "") if found else (None, "bubblewrap (bwrap) is not installed: apt-get install bubblewrap")


def bwrap_version(path: str) -> str | None:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.split()[-1] if out.split() else None


def _etc_masks() -> list[str]:
    """Files and dirs under /etc that others may not read (shadow, gshadow, ssh host keys, ...):
    inside the sandbox, whose uid maps to kiln's, they would be readable as their owner's."""
    args: list[str] = []
    for top, dirs, files in os.walk("/etc"):
        for name in list(dirs):
            path = os.path.join(top, name)
            st = os.lstat(path)
            if stat.S_ISDIR(st.st_mode) and not st.st_mode & stat.S_IROTH:
                args += ["--tmpfs", path, "--remount-ro", path]
                dirs.remove(name)
        for name in files:
            path = os.path.join(top, name)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and not st.st_mode & stat.S_IROTH:
                args += ["--ro-bind", "/dev/null", path]
    return args


def _system_args() -> list[str]:
    args: list[str] = []
    for d in confine.SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    return args + _etc_masks()


def _dev_args() -> list[str]:
    args = ["--tmpfs", "/dev"]
    for node in [*confine.DEVICE_FILES, *confine.gpu_devices()]:
        if os.path.exists(node):
            args += ["--dev-bind", node, node]
    for i, name in enumerate(("stdin", "stdout", "stderr")):
        args += ["--symlink", f"/proc/self/fd/{i}", f"/dev/{name}"]
    return args + ["--symlink", "/proc/self/fd", "/dev/fd", "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]


def outer_args(bwrap: str, *, env: dict[str, str], read: list[str] = (), write: list[str] = (),  # type: ignore[assignment]
               chdir: str = "/") -> list[str]:
    """The bubblewrap command line up to (and including) `--`."""
    args = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--uid", str(confine.NOBODY),
            "--gid", str(confine.NOBODY), "--hostname", "kiln-sandbox", "--cap-drop", "ALL",
            "--cap-add", "CAP_SYS_ADMIN", *_cached_system_args()]
    args += ["--proc", "/proc", "--ro-bind", "/sys", "/sys", *_dev_args(), "--tmpfs", "/tmp"]
    bound: set[str] = set()
    for p in confine.code_paths(env) + [str(p) for p in read]:
        args += _read_bind(p, bound)
    for p in write:
        Path(p).mkdir(parents=True, exist_ok=True) if not os.path.exists(p) else None
        args += ["--bind", str(p), str(p)]
    return args + ["--remount-ro", "/", "--chdir", chdir, "--"]


def _under(path: str, tops: object) -> bool:
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in tops)  # type: ignore[attr-defined]


def _read_bind(p: str, bound: set[str]) -> list[str]:
    """Read-only binds for `p`: nothing when a system dir bound whole already holds it; its real
    path (bubblewrap can't bind onto a symlink: /usr/local/cuda -> cuda-13.0 on the H200), plus the
    link itself where no bound dir provides it."""
    if not os.path.exists(p):
        return []
    real = os.path.realpath(p)
    system = [d for d in confine.SYSTEM_DIRS if os.path.isdir(d) and not os.path.islink(d)]
    args: list[str] = []
    if not _under(real, system) and not _under(real, bound):
        args += ["--ro-bind", real, real]
        bound.add(real)
    if real != os.path.abspath(p) and not _under(os.path.abspath(p), system) and not _under(p, bound):
        args += ["--symlink", real, os.path.abspath(p)]
        bound.add(os.path.abspath(p))
    return args


@functools.lru_cache(maxsize=1)
def _cached_system_args() -> tuple[str, ...]:
    return tuple(_system_args())


# ----------------------------------------------------------------------------- the level in force


@dataclass(frozen=True)
class Sandbox:
    """The containment this kiln process applies to its workers (decided once, by the probe)."""

    level: str
    bwrap: str | None  # None: no outer layer
    plan: Plan
    record: IsolationRecord

    @property
    def key(self) -> tuple:
        return (self.bwrap, self.plan)

    def server_command(self, argv: list[str], *, env: dict[str, str], write: list[str]) -> list[str]:
        """How to start a fork server: inside the outer layer, told which inner steps to apply."""
        inner = [*argv, "--plan", self.plan.as_json()]
        return outer_args(self.bwrap, env=env, write=write) + inner if self.bwrap else inner

    def command(self, argv: list[str], conf: Confinement, *, env: dict[str, str], cwd: str,
                status_fd: int | None = None) -> list[str]:
        """A one-shot confined run of `argv` (both layers); its exit code (or -signal) is written
        to `status_fd`, an inherited pipe the worker itself never holds."""
        launch = [sys.executable, "-m", "kiln.tools.sandbox.launch", "run", "--plan", self.plan.as_json(),
                  "--confine", json.dumps(conf.as_dict()),
                  *(["--status-fd", str(status_fd)] if status_fd is not None else []), "--", *argv]
        if not self.bwrap:
            return launch
        return outer_args(self.bwrap, env=env, read=list(conf.read), write=[*conf.write, *conf.fill],
                          chdir=cwd) + launch


def _probe(bwrap: str | None, env: dict[str, str]) -> tuple[dict | None, str]:
    argv = [sys.executable, "-m", "kiln.tools.sandbox.launch", "probe"]
    if bwrap:
        argv = outer_args(bwrap, env=env) + argv
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, str(exc)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1]), ""
    except (ValueError, IndexError):
        lines = [ln for ln in (p.stderr or "").strip().splitlines() if ln.strip()]
        return None, (lines[-1] if lines else f"exit code {p.returncode}")[:300]


def _record(level: str, bwrap: str | None, version: str | None, bwrap_why: str, probe: dict) -> IsolationRecord:
    plan, missing = Plan(**probe["plan"]), dict(probe.get("missing") or {})
    have = {"bwrap": bwrap is not None, "pid-namespace": plan.pidns, "mount-namespace": plan.pidns,
            "net-namespace": plan.pidns or plan.userns, "ipc-namespace": plan.pidns or plan.userns,
            "user-namespace": plan.userns, "landlock-fs": plan.landlock >= 1, "landlock-tcp": plan.landlock >= 4,
            "landlock-scope": plan.landlock >= 6, "kiln-non-dumpable": not nsutil.dumpable(),
            **dict.fromkeys(ALWAYS, True), "no-capabilities": plan.drop_caps}
    why = {"bwrap": bwrap_why, "mount-namespace": missing.get("pid-namespace", ""),
           "net-namespace": "needs a PID or user namespace", "ipc-namespace": "needs a PID or user namespace",
           "landlock-fs": missing.get("landlock", ""),
           "landlock-tcp": f"needs Landlock ABI 4, the kernel has {probe.get('landlock_abi', 0)}",
           "landlock-scope": f"needs Landlock ABI 6, the kernel has {probe.get('landlock_abi', 0)}",
           "kiln-non-dumpable": "prctl(PR_SET_DUMPABLE, 0) did not hold", **missing}
    layers = [name for name in ALL_LAYERS if have.get(name)]
    gaps = {name: why.get(name) or "not available" for name in ALL_LAYERS if not have.get(name)}
    return IsolationRecord(level=level, complete=not gaps, layers=layers, missing=gaps, bwrap=bwrap,
                           bwrap_version=version, landlock_abi=int(probe.get("landlock_abi", 0)))


CUDA_NEEDS_BWRAP = ("CUDA fails to start (error 304) in a worker contained without bubblewrap's outer layer "
                    "(measured on the H200, 2026-12-01): left out on this GPU machine; install bubblewrap")
WITHOUT_BWRAP_ON_GPU = ("pid-namespace", "user-namespace", "landlock", "no-capabilities")


def _without_namespaces(probe: dict) -> dict:
    """On a GPU machine without bubblewrap the inner layer's steps broke CUDA (error 304, even with
    the namespaces left out), so workers get the scrubbed environment, their own session, the
    parent-death signal, no_new_privs and closed fds only; the record says what is missing and why."""
    plan = {**probe.get("plan", {}), "pidns": False, "userns": False, "landlock": 0, "drop_caps": False}
    missing = {**probe.get("missing", {}), **dict.fromkeys(WITHOUT_BWRAP_ON_GPU, CUDA_NEEDS_BWRAP)}
    return {**probe, "plan": plan, "missing": missing}


def _probe_env() -> dict[str, str]:
    from kiln.tools.sandbox.isolation import scrubbed_env

    return scrubbed_env(device="cpu", gpu_index=0, cache_dir=scratch.root() / "probe")


@functools.lru_cache(maxsize=8)
def _resolve(level: str, configured: str | None) -> Sandbox:
    harden_self()
    env = _probe_env()
    bwrap, why = find_bwrap(configured)
    version = bwrap_version(bwrap) if bwrap else None
    probe, err = _probe(bwrap, env) if bwrap else (None, "")
    if probe is None and bwrap:  # bubblewrap is there but cannot start here (user namespaces off, ...)
        why, bwrap = f"bubblewrap failed to start: {err}", None
    if probe is None:
        probe, err = _probe(None, env)
    probe = probe or {"plan": {}, "missing": {"pid-namespace": err, "user-namespace": err, "landlock": err}}
    if bwrap is None and os.path.exists("/dev/nvidiactl"):
        probe = _without_namespaces(probe)
    rec = _record(level, bwrap, version, why, probe)
    return Sandbox(level=level, bwrap=bwrap, plan=Plan(**probe["plan"]), record=rec)


def describe(bwrap: str | None = None) -> IsolationRecord:
    """What this machine's sandbox has in force (no warning, no refusal): `kiln doctor`'s line."""
    with _LOCK:
        return _resolve("best-effort", bwrap).record


def sandbox_for(level: str = "best-effort", bwrap: str | None = None) -> Sandbox:
    """The sandbox for this level; strict and incomplete raises KilnConfigError (one line), a
    best-effort gap is said once per process on stderr."""
    with _LOCK:
        box = _resolve(level, bwrap)
    rec = box.record
    if rec.complete:
        return box
    gaps = "; ".join(f"{k}: {v}" for k, v in rec.missing.items())
    if level == "strict":
        raise KilnConfigError(f"--isolation strict: the OS sandbox is incomplete here ({gaps}); "
                              "install bubblewrap (or pass its path with --bwrap) or use --isolation best-effort")
    if gaps not in _WARNED:
        _WARNED.add(gaps)
        print(f"kiln: warning: the OS sandbox is partial (best-effort); missing {gaps}", file=sys.stderr)
    return box


def harden_self() -> None:
    """kiln's own process becomes non-dumpable: no process of the same user (a worker, whatever
    it escapes to) may read its memory or /proc/PID/environ (where API keys live)."""
    with contextlib.suppress(OSError):
        nsutil.prctl(nsutil.PR_SET_DUMPABLE, 0)


def server_mounts(cache_root: Path, scratch_dir: Path | None = None) -> list[str]:
    """What a fork server's bubblewrap mounts read-write: kiln's scratch root (every check's work
    dirs and the control dir; a resident server's: the dir of every process's roots), the
    candidates' compile caches (`cand/`) and the server's own (`zygote/`: its bytecode and HOME; the
    baseline worker writes only `zygote/baseline/` in it).
    Landlock then gives each worker its own part only."""
    paths = [str(scratch_dir or scratch.root()), str(cache_root / "cand"), str(cache_root / "zygote")]
    profile = os.environ.get("KILN_PROFILE_WORKERS")  # a developer's switch (kiln.tools.check.caches)
    return paths + ([profile] if profile else [])
