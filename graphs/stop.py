"""Ctrl-C: stop a run within seconds, leaving nothing half-recorded.

`request()` (the CLI's SIGINT handler calls it, before raising KeyboardInterrupt) marks this process
as stopping and ends every process it started: the checks in flight (each worker in its own process
group), their fork servers, the Proposer's reference runs. A check that comes back after that is not
a verdict: `guard_result` refuses to record it (it would be cached as a crash), so a resumed run
checks it again. Nothing else a node finished is lost: its writes are in the checkpoint.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from pathlib import Path

_STOPPING = threading.Event()


class RunStopped(KeyboardInterrupt):
    """Raised where a result produced after Ctrl-C would otherwise be recorded."""


def requested() -> bool:
    return _STOPPING.is_set()


def reset() -> None:
    """For a process that runs again after a stop (tests, `kiln ui`'s control)."""
    _STOPPING.clear()


def _children() -> dict[int, list[int]]:
    """ppid -> pids, from /proc (every process this user can see)."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def descendants(pid: int | None = None) -> list[int]:
    """Every process below `pid` (this one by default), parents before children."""
    tree, out, todo = _children(), [], [pid or os.getpid()]
    while todo:
        kids = tree.get(todo.pop(0), [])
        out += kids
        todo += kids
    return out


def end_descendants() -> int:
    """SIGKILL every process this one started, with the process group each leads (a worker's own
    session: its compiler and ninja grandchildren go too). Returns how many were signalled."""
    mine, killed = os.getpgid(0), 0
    for pid in descendants():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            pgid = os.getpgid(pid)
            if pgid != mine and pgid == pid:
                os.killpg(pgid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
            killed += 1
    return killed


def request() -> None:
    """Ctrl-C was pressed: from now on nothing new is recorded, and the work in flight ends now."""
    _STOPPING.set()
    end_descendants()


def guard_result() -> None:
    """Call between a check (or reference run) returning and its result being stored."""
    if _STOPPING.is_set():
        raise RunStopped("stopped by Ctrl-C before this result was recorded")
