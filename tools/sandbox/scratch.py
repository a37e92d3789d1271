"""kiln's scratch root: one folder per kiln process, where every check's work dirs live.

`/dev/shm/kiln-<pid>-<start time>/` (RAM: trial outputs are written and read once), or under the
temp dir when /dev/shm is small; with a resident fork server (the default), inside the per-user
`kiln-shared-<uid>/` there, which that server mounts for every kiln process. The sandbox mounts it read-write for the fork server; each worker
may write only its own dir inside it (Landlock). `ctl/` holds the fork server's status files,
which no worker may write. At first use, the scratch roots of kiln processes that are gone are
removed; at exit (SIGINT included) or on SIGTERM or SIGHUP, this process removes its own.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import stat
import tempfile
import threading
import time
from pathlib import Path

SHM = Path("/dev/shm")
SHM_MIN_FREE = 2 << 30
NAME = re.compile(r"^kiln-(\d+)-(\d+)$")
OLD_NAME = re.compile(r"^kiln-check-[\w]+$")  # before per-process roots: removed once a day old
OLD_MAX_AGE_S = 24 * 3600.0
_ROOT: list[Path] = []
_LOCK = threading.Lock()


def start_time(pid: int) -> int | None:
    """The process's start time (clock ticks since boot), None when no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text.rsplit(")", 1)[1].split()[19])


def base_dir() -> Path:
    if SHM.is_dir() and os.access(SHM, os.W_OK) and shutil.disk_usage(SHM).free > SHM_MIN_FREE:
        return SHM
    return Path(tempfile.gettempdir())


def _rmtree(path: Path) -> None:
    def unlock(fn, p, _exc) -> None:  # a 0311 dir (a check's work dir): make it listable, try again
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(p), 0o700)
            os.chmod(p, 0o700)
            shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else os.unlink(p)

    with contextlib.suppress(OSError):
        os.chmod(path, 0o700)
    shutil.rmtree(path, onerror=unlock)


def stale(name: str, path: Path) -> bool:
    m = NAME.match(name)
    if m:
        pid, started = int(m.group(1)), int(m.group(2))
        return start_time(pid) != started and pid != os.getpid()
    if OLD_NAME.match(name):
        with contextlib.suppress(OSError):
            return time.time() - path.stat().st_mtime > OLD_MAX_AGE_S
    return False


def clean_stale(base: Path | None = None) -> list[Path]:
    """Remove the scratch roots of kiln processes that are gone (other users' are left alone)."""
    removed = []
    for path in (base or base_dir()).glob("kiln-*"):
        if path.is_dir() and not path.is_symlink() and stale(path.name, path):
            with contextlib.suppress(OSError):
                if path.stat().st_uid == os.getuid():
                    _rmtree(path)
                    removed.append(path)
    return removed


MODE_ENV = "KILN_FORK_SERVER"


def enabled() -> bool:
    """Does this process use a resident fork server (kiln.tools.sandbox.resident), and so nest its
    scratch root in the per-user dir that server mounts? On unless KILN_FORK_SERVER=process."""
    return os.environ.get(MODE_ENV, "resident").strip().lower() not in ("process", "0", "off", "no")


def private_dir(path: Path) -> Path | None:
    """`path` as a 0700 dir owned by this user (created if missing); None if it is anything else
    (another user's, a link): then nothing of ours goes there."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        return None
    if st.st_mode & 0o077:
        with contextlib.suppress(OSError):
            os.chmod(path, 0o700)
    return path


def shared_dir() -> Path | None:
    """With a resident fork server, the per-user dir that holds every kiln process's scratch root,
    which that server mounts once for all; None without one."""
    if not enabled():
        return None
    return private_dir(base_dir() / f"kiln-shared-{os.getuid()}")


def root() -> Path:
    """This process's scratch root, created (and stale ones cleaned) on first use."""
    with _LOCK:
        if _ROOT and _ROOT[0].is_dir():
            return _ROOT[0]
        base = shared_dir() or base_dir()
        clean_stale(base)
        path = base / f"kiln-{os.getpid()}-{start_time(os.getpid()) or 0}"
        path.mkdir(mode=0o700, exist_ok=True)
        (path / "ctl").mkdir(mode=0o700, exist_ok=True)
        _ROOT[:] = [path]
        _install_cleanup()
        return path


def at_start() -> None:
    """kiln's entry point: clean what dead kiln processes left, and remove this one's scratch
    root on SIGTERM/SIGHUP (handlers can only be set from the main thread, where this runs; a
    check may first need the root from another thread)."""
    clean_stale()
    shared = shared_dir()
    if shared is not None:
        clean_stale(shared)
    _install_cleanup()


def ctl_dir() -> Path:
    return root() / "ctl"


def remove_own() -> None:
    if _ROOT and _ROOT[0].name.startswith(f"kiln-{os.getpid()}-"):
        _rmtree(_ROOT[0])


def _on_signal(signum: int, _frame: object) -> None:
    remove_own()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


_INSTALLED: list[bool] = []


def _install_cleanup() -> None:
    if not _INSTALLED:
        atexit.register(remove_own)
        _INSTALLED.append(True)
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):  # SIGINT: KeyboardInterrupt, then atexit
        if signal.getsignal(sig) == signal.SIG_DFL:
            signal.signal(sig, _on_signal)
