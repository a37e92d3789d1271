"""kiln's scratch root: stale roots of dead kiln processes go at the next start, a live one's stay,
and SIGTERM or Ctrl-C to kiln removes its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kiln.tools.sandbox import scratch


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_stale_roots_are_removed_live_ones_kept(tmp_path: Path) -> None:
    dead = tmp_path / f"kiln-{_dead_pid()}-12345"
    (dead / "check-x" / "reference").mkdir(parents=True)
    (dead / "check-x" / "reference" / "out.pt").write_text("left behind by a killed kiln")
    os.chmod(dead / "check-x", 0o311)  # a check's work dir, as the session leaves it
    reused = tmp_path / f"kiln-{os.getppid()}-1"  # a live pid, another start time: pid reuse, stale
    reused.mkdir()
    live = tmp_path / f"kiln-{os.getpid()}-{scratch.start_time(os.getpid())}"
    live.mkdir()
    other = tmp_path / "kiln-not-ours"
    other.mkdir()
    removed = scratch.clean_stale(tmp_path)
    assert sorted(removed) == sorted([dead, reused])
    assert not dead.exists() and not reused.exists() and live.exists() and other.exists()


CHILD = """
import sys, threading, time
from kiln.tools.sandbox import scratch
if sys.argv[1] == "thread":  # kiln's entry point, then a check that makes the root off the main thread
    scratch.at_start()
    t = threading.Thread(target=scratch.root)
    t.start()
    t.join()
print(scratch.root(), flush=True)
if sys.argv[1] == "int":
    try:
        time.sleep(60)
    except KeyboardInterrupt:
        raise SystemExit(130)
time.sleep(60)
"""


def _root_then_signal(sig: int, mode: str) -> tuple[Path, int]:
    p = subprocess.Popen([sys.executable, "-c", CHILD, mode], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    root = Path(p.stdout.readline().strip())
    assert root.is_dir() and (root / "ctl").is_dir()
    (root / "check-y").mkdir()
    time.sleep(0.2)
    p.send_signal(sig)
    return root, p.wait(timeout=30)


@pytest.mark.parametrize("mode", ["term", "thread"])
def test_sigterm_removes_the_scratch_root(mode: str) -> None:
    root, rc = _root_then_signal(signal.SIGTERM, mode)
    assert rc == -signal.SIGTERM and not root.exists()


def test_ctrl_c_removes_the_scratch_root() -> None:
    root, rc = _root_then_signal(signal.SIGINT, "int")
    assert rc == 130 and not root.exists()


def test_the_next_start_cleans_what_sigkill_left() -> None:
    root, rc = _root_then_signal(signal.SIGKILL, "kill")
    assert rc == -signal.SIGKILL and root.exists()  # nothing runs on SIGKILL ...
    assert root in scratch.clean_stale(root.parent) and not root.exists()  # ... the next kiln cleans it
