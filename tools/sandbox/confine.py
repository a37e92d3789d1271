"""The inner layer of the sandbox: what a worker process does to itself before any worker code runs.

The spawner (the fork server, or the one-shot launcher `python -m kiln.tools.sandbox.launch run`)
calls `fork_worker(plan)`; the child calls `enter(confinement, plan)`. With `plan.pidns` the child is
pid 2 of a new PID namespace whose pid 1 is a tiny init (it dies with the spawner), so a worker sees neither kiln, nor the server, nor its siblings, and when the spawner
kills that init everything the worker started dies with it. `enter`:

1. a new session, `PR_SET_PDEATHSIG` (the worker dies with its spawner);
2. plan.pidns: own mount, network, IPC and UTS namespaces and a fresh `/proc` (CUDA needs one that
   matches the PID namespace), at most `PID_MAX` tasks in its PID namespace (the kernel's namespaced
   `pid_max`, Linux >= 6.14: a fork bomb stops there), and a size-limited tmpfs as its scratch dir
   (`scratch_bytes`; HOME and TMPDIR point there, and it vanishes with the worker); needs
   CAP_SYS_ADMIN where the spawner runs (the bubblewrap layer grants exactly that to the fork
   server, root has it);
3. plan.userns: a nested user namespace (uid 65534), which also gives network and IPC namespaces
   when there is no pidns;
4. no capabilities (bounding set included), `no_new_privs`;
5. Landlock (plan.landlock = ABI): reads of the system, Python and kiln paths plus the spawn's
   `read` paths, writes to its `write` paths only, and into the files that already exist beneath
   its `fill` paths (no creating, removing, renaming or linking there: kiln made those files), no
   TCP bind/connect, no signals or abstract unix sockets across the boundary;
6. every inherited file descriptor above 2 closed.

A planned step that fails raises `SandboxError`: the worker must not run half-contained (the
probe, `probe()`, decides beforehand which steps this machine supports).
"""

from __future__ import annotations

import contextlib
import functools
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field

from kiln.tools.files import write_atomic
from kiln.tools.sandbox import landlock, nsutil
from kiln.tools.sandbox.nsutil import SandboxError

SANDBOX_EXIT = 97  # a worker whose containment failed exits with this code (stderr says why)
NOBODY = 65534
SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/etc", "/opt")
DEVICE_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
ENV_DIRS = ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "TRITON_PTXAS_PATH", "TRITON_LIBCUDA_PATH")
ENV_PATH_LISTS = ("LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "PYTHONPATH")
KILN_PACKAGES = ("kiln", "kiln.tools", "kiln.agents", "kiln.graphs", "kiln.evals", "kiln.rewards")
# pid 1 of a worker's PID namespace, dying with the spawner: `sleep` under util-linux's setpriv
# (milliseconds to start), else a few lines of Python that also reap what the worker orphans (tens
# of milliseconds of CPU per worker, which a busy 2-core machine feels)
INIT = ("import ctypes,os,signal\nctypes.CDLL(None).prctl(1,9)\nsignal.signal(signal.SIGCHLD,lambda*a:None)\n"
        "while 1:\n try:os.wait()\n except ChildProcessError:signal.pause()\n except InterruptedError:pass\n")


@functools.lru_cache(maxsize=1)
def init_argv() -> tuple[str, ...]:
    setpriv, sleep = shutil.which("setpriv"), shutil.which("sleep")
    if setpriv and sleep and "--pdeathsig" in subprocess.run([setpriv, "--help"], capture_output=True,
                                                              text=True, check=False).stdout:
        return (setpriv, "--pdeathsig", "KILL", "--", sleep, "infinity")
    return (sys.executable, "-S", "-I", "-c", INIT)


@dataclass(frozen=True)
class Confinement:
    """What one worker may touch beyond the system, Python and kiln's own code (read-only for all).

    read:  extra paths it may read (a check's shared dir: problem, cases, candidate);
    write: its own work dir first (with `locked_own`, there it may read, overwrite and remove kiln's
           files, e.g. its command pipes, and create files only in `tmp/`, its scratch dir), then
           paths it may read and write freely (its own compile-cache dir);
    fill:  dirs whose existing files it may read and overwrite, creating nothing (its output files);
    scratch_bytes: the size of its private tmpfs scratch dir (HOME, TMPDIR) where it has its own
    mounts; 0: a plain dir in its work dir."""

    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    fill: tuple[str, ...] = ()
    scratch_bytes: int = 0
    locked_own: bool = False  # True: in its own dir it may create files only in tmp/ (a check's workers)

    def as_dict(self) -> dict:
        return {"read": list(self.read), "write": list(self.write), "fill": list(self.fill),
                "scratch_bytes": self.scratch_bytes, "locked_own": self.locked_own}

    @classmethod
    def from_dict(cls, d: dict) -> Confinement:
        return cls(read=tuple(map(str, d.get("read") or ())), write=tuple(map(str, d.get("write") or ())),
                   fill=tuple(map(str, d.get("fill") or ())), scratch_bytes=int(d.get("scratch_bytes") or 0),
                   locked_own=bool(d.get("locked_own")))


@dataclass(frozen=True)
class Plan:
    """Which inner steps this machine supports (`probe()`); the rest are always applied."""

    pidns: bool = False
    userns: bool = False
    landlock: int = field(default=0, metadata={"doc": "Landlock ABI applied; 0: none"})
    drop_caps: bool = field(default=True, metadata={"doc": "False only where CUDA must run without bubblewrap"})

    def as_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Plan:
        d = json.loads(text)
        return cls(pidns=bool(d.get("pidns")), userns=bool(d.get("userns")), landlock=int(d.get("landlock", 0)),
                   drop_caps=bool(d.get("drop_caps", True)))


# ----------------------------------------------------------------------------- what a worker may read


def _existing(paths: list[str]) -> list[str]:
    home, out = os.path.expanduser("~"), []
    for p in paths:
        p = os.path.abspath(p) if p else ""
        if p and p not in ("/", home) and os.path.exists(p) and p not in out:
            out.append(p)
    return out


def kiln_source_dirs() -> list[str]:
    dirs: list[str] = []
    for name in KILN_PACKAGES:
        spec = importlib.util.find_spec(name)
        dirs += list(spec.submodule_search_locations or []) if spec else []
    return dirs


def python_dirs() -> list[str]:
    import site

    dirs = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    dirs += [p for p in site.getsitepackages() if p]
    dirs += [p for p in sys.path if p and ("site-packages" in p or p.endswith("dist-packages"))]
    return dirs


def env_dirs(env: dict[str, str]) -> list[str]:
    dirs = [env[k] for k in ENV_DIRS if env.get(k)]
    for k in ENV_PATH_LISTS:
        dirs += [p for p in env.get(k, "").split(os.pathsep) if p]
    return dirs


def code_paths(env: dict[str, str] | None = None) -> list[str]:
    """Python's prefixes and site-packages, kiln's source folders and the toolchain folders the
    environment names (CUDA_HOME, LD_LIBRARY_PATH, ...): read-only for every worker."""
    env = dict(os.environ) if env is None else env
    return list(_code_paths(tuple(env.get(k, "") for k in ENV_DIRS + ENV_PATH_LISTS)))


@functools.lru_cache(maxsize=16)
def _code_paths(env_values: tuple[str, ...]) -> tuple[str, ...]:
    env = dict(zip(ENV_DIRS + ENV_PATH_LISTS, env_values, strict=True))
    return tuple(_existing(python_dirs() + kiln_source_dirs() + env_dirs(env)))


def gpu_devices() -> list[str]:
    return sorted(glob.glob("/dev/nvidia*")) + sorted(glob.glob("/dev/dri"))


def readable_tree(top: str) -> list[str]:
    """Paths that cover every file under `top` that others may read, and nothing else: a subtree
    whole when all of it is readable, else its readable entries one by one (Landlock grants
    beneath a path and cannot carve /etc/shadow out of /etc)."""
    try:
        entries = list(os.scandir(top))
    except OSError:
        return []
    if all(_world_readable(e) and not (e.is_dir(follow_symlinks=False) and _has_secret(e.path)) for e in entries):
        return [top]
    out = []
    for e in entries:
        if not _world_readable(e):
            continue
        out += readable_tree(e.path) if e.is_dir(follow_symlinks=False) else [e.path]
    return out


def _world_readable(entry: os.DirEntry) -> bool:
    try:
        return bool(entry.stat(follow_symlinks=False).st_mode & 0o004) or entry.is_symlink()
    except OSError:
        return False


def _has_secret(top: str) -> bool:
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            try:
                if not os.lstat(os.path.join(root, name)).st_mode & 0o004:
                    return True
            except OSError:
                continue
    return False


@functools.lru_cache(maxsize=1)
def _system_rules() -> tuple[tuple[str, int], ...]:
    dirs = [d for d in _existing(list(SYSTEM_DIRS)) if d != "/etc"]
    etc = [(p, landlock.READ) for p in readable_tree("/etc")] + [("/etc", landlock.READ_DIR)]
    return tuple([(p, landlock.READ) for p in dirs] + etc)


def warm() -> None:
    """Compute the system rules and code paths now (a fork server, before forking its workers)."""
    init_argv()
    landlock.preopen(p for p, _ in _system_rules())
    landlock.preopen(code_paths())


PROC_OWN = landlock.READ_FILE | landlock.READ_DIR | landlock.WRITE_FILE | landlock.TRUNCATE
FILL = landlock.READ_FILE | landlock.READ_DIR | landlock.WRITE_FILE | landlock.TRUNCATE
OWN_DIR = FILL | landlock.REMOVE_FILE
PID_MAX = 1024  # tasks (threads count) a worker's PID namespace may hold; the kernel's floor is 301


def landlock_rules(conf: Confinement, own_proc: bool = False) -> list[tuple[str, int]]:
    """`own_proc`: /proc is the worker's own (a fresh mount of its PID namespace): it may write
    there too. CUDA does (the driver failed with error 304 under a read-only /proc, on the H200
    2026-12-01, and started once /proc was writable). The kernel's own checks still apply, and
    Landlock's ptrace rule keeps the worker off its namespace's init (outside its domain); the
    only writable files are the worker's own. Without a PID namespace, /proc shows the host's
    processes: only the worker's own /proc/self is writable then."""
    rules = list(_system_rules()) + [(p, landlock.READ) for p in code_paths()]
    rules += [("/proc", PROC_OWN if own_proc else landlock.READ_FILE | landlock.READ_DIR),
              ("/sys", landlock.READ_FILE | landlock.READ_DIR)]
    rules += [] if own_proc else [("/proc/self", PROC_OWN)]
    rules += [(d, landlock.DEVICE) for d in [*DEVICE_FILES, *gpu_devices()]]
    rules += [(p, landlock.READ) for p in conf.read]
    rules += [(p, landlock.WRITE) for p in (conf.write[1:] if conf.locked_own else conf.write)]
    if conf.write and conf.locked_own:  # its own dir: overwrite and remove kiln's files, create only in tmp/
        own = conf.write[0]
        rules += [(own, OWN_DIR), (os.path.join(own, "tmp"), landlock.WRITE)]
    return rules + [(p, FILL) for p in conf.fill]


# ----------------------------------------------------------------------------- the worker's side


def enter(conf: Confinement, plan: Plan, keep_fds: tuple[int, ...] = ()) -> None:
    """Contain this (freshly forked) process: see the module docstring. Raises SandboxError."""
    os.setsid()
    nsutil.prctl(nsutil.PR_SET_PDEATHSIG, 9)
    uid, gid = os.getuid(), os.getgid()
    if plan.pidns:
        _own_mounts()
        _cap_tasks()
        _cover_proc()
        _read_only_view(conf)
        _scratch(conf)
    if plan.userns:
        nsutil.unshare(nsutil.CLONE_NEWUSER | (0 if plan.pidns else
                                               nsutil.CLONE_NEWNET | nsutil.CLONE_NEWIPC | nsutil.CLONE_NEWUTS))
        nsutil.map_ids(NOBODY, uid, NOBODY, gid)
    if conf.write:  # its scratch dir exists before Landlock: the rule grants beneath it, and only there
        os.makedirs(os.path.join(conf.write[0], "tmp"), exist_ok=True)  # may it create files in its own dir
    if plan.drop_caps:
        nsutil.drop_capabilities()
    nsutil.prctl(nsutil.PR_SET_NO_NEW_PRIVS, 1)
    if plan.landlock:
        try:
            landlock.restrict(landlock_rules(conf, own_proc=plan.pidns), abi=plan.landlock)
        except OSError as exc:
            raise SandboxError(exc.errno or 1, str(exc)) from None
    _private_home(conf)
    close_fds(keep_fds)


def close_fds(keep: tuple[int, ...] = ()) -> None:
    """Close every inherited descriptor above 2 except `keep`."""
    lo = 3
    for fd in sorted(k for k in keep if k >= 3):
        os.closerange(lo, fd)
        lo = fd + 1
    os.closerange(lo, 1 << 16)


def _own_mounts() -> None:
    nsutil.unshare(nsutil.CLONE_NEWNS | nsutil.CLONE_NEWNET | nsutil.CLONE_NEWIPC | nsutil.CLONE_NEWUTS)
    nsutil.mount(None, "/", None, nsutil.MS_REC | nsutil.MS_PRIVATE)
    nsutil.mount("proc", "/proc", "proc", nsutil.MS_NOSUID | nsutil.MS_NODEV | nsutil.MS_NOEXEC)


PROC_COVERS = ("sys", "sysrq-trigger", "irq", "bus")
"""Parts of a fresh /proc that reach the whole machine (sysctls, the magic SysRq key, IRQ and bus
settings), read-only for a worker, as bubblewrap does for its own /proc."""


def _cover_proc() -> None:
    """Bind each of `PROC_COVERS` read-only over itself in the worker's fresh /proc. The kernel lets
    a process whose uid is root's outside every namespace write the machine's sysctls on its mode
    bits alone, capabilities or not: a worker of kiln run as root (a container) could otherwise set
    `kernel.core_pattern`. /proc stays writable elsewhere (CUDA writes its own process's files)."""
    for name in PROC_COVERS:
        path = os.path.join("/proc", name)
        if os.path.exists(path):
            nsutil.mount(path, path, None, nsutil.MS_BIND | nsutil.MS_REC)
            nsutil.remount_read_only(path, {"nosuid", "nodev", "noexec", "relatime"})


def _read_only_view(conf: Confinement) -> None:
    """Every mount in the worker's namespace read-only, but its own `write` and `fill` paths (each
    bound over itself first, so it is a mount of its own that stays writable) and its /proc.
    Landlock decides which files a worker may open, not what it may do to their metadata: without
    this, a worker could chmod, chown or touch whatever its uid owns on the writable mounts the
    fork server shares with every worker (the candidates' cache root, kiln's control dir, the
    sandbox's /tmp and /dev/shm, another worker's inputs) and, with kiln run as root, the host's
    device nodes. Device nodes stay usable on a read-only mount."""
    keep = [p for p in (*conf.write, *conf.fill) if os.path.exists(p)]
    for p in keep:
        nsutil.mount(p, p, None, nsutil.MS_BIND | nsutil.MS_REC)
    for point, options in nsutil.mounts():
        if "rw" in options and not _beneath(point, ("/proc", *keep)):
            nsutil.remount_read_only(point, options)
    with contextlib.suppress(OSError):  # a working dir entered before: now through its own mount
        os.chdir(os.getcwd())


def _beneath(path: str, tops: tuple[str, ...]) -> bool:
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in tops)


def _cap_tasks() -> None:
    """At most PID_MAX tasks in this (new) PID namespace. Only where the kernel namespaces pid_max
    (Linux >= 6.14): before that there is one global pid_max, and writing it would change the
    host's (and succeed, for root without a user namespace)."""
    if kernel_version() < (6, 14):
        return
    with contextlib.suppress(OSError), open("/proc/sys/kernel/pid_max", "w") as f:
        f.write(str(PID_MAX))


def kernel_version() -> tuple[int, int]:
    try:
        major, minor = os.uname().release.split(".")[:2]
        return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)
    except ValueError:
        return (0, 0)


def _scratch(conf: Confinement) -> None:
    """A size-limited tmpfs on the worker's scratch dir: what it writes there counts against
    `scratch_bytes` of memory and disappears with its mount namespace."""
    if not conf.write or conf.scratch_bytes <= 0:
        return
    tmp = os.path.join(conf.write[0], "tmp")
    os.makedirs(tmp, exist_ok=True)
    nsutil.mount("tmpfs", tmp, "tmpfs", nsutil.MS_NOSUID | nsutil.MS_NODEV,
                 f"size={conf.scratch_bytes},mode=0700,uid={os.getuid()},gid={os.getgid()}")


def _private_home(conf: Confinement) -> None:
    """HOME and TMPDIR in a folder of the worker's own dir, the one place it may write (not a
    private tmpfs on /tmp: that would hide confinement paths under /tmp)."""
    if not conf.write:
        return
    tmp = os.path.join(conf.write[0], "tmp")
    os.makedirs(tmp, exist_ok=True)
    os.environ["HOME"] = os.environ["TMPDIR"] = tmp


# ----------------------------------------------------------------------------- the spawner's side


_OWN_PIDNS: list[int] = []
_NULL_STDIO = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]


def _own_pidns_fd() -> int:
    if not _OWN_PIDNS:
        _OWN_PIDNS.append(os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC))
    return _OWN_PIDNS[0]


def fork_worker(plan: Plan) -> tuple[int, int | None]:
    """fork(). With plan.pidns the child is pid 2 of a new PID namespace whose pid 1 is `INIT`
    (spawned cheaply, not forked). Returns (0, None) in the child, (pid, init pid or None) here."""
    if not plan.pidns:
        return os.fork(), None
    own, argv = _own_pidns_fd(), init_argv()  # before unshare: the next process made is the new pid 1
    nsutil.unshare(nsutil.CLONE_NEWPID)
    pid: int | None = None
    try:
        init = os.posix_spawn(argv[0], list(argv), dict(os.environ), file_actions=_NULL_STDIO)
        pid = os.fork()
    finally:
        if pid != 0:
            nsutil.setns(own, nsutil.CLONE_NEWPID)  # later children are ours again
    return pid, (init if pid else None)


def kill_worker(pid: int, init: int | None) -> None:
    """SIGKILL the worker and all it started (its namespace's init, else its process group)."""
    for fn, target in ((os.kill, init), (os.killpg, pid), (os.kill, pid)):
        if target:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                fn(target, 9)


def wait_code(status: int) -> int:
    """A wait status as Popen's returncode: the exit code, or -signal."""
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def write_status(path: str, code: int) -> None:
    write_atomic(path, str(code))
