"""Helpers for the sandbox tests: real bubblewrap, real namespaces, real Landlock, real sockets.

`targets` plants what a hostile worker must not reach (secrets in $HOME, in a run dir and in a
sibling worker's dir, files it must not create in $HOME, the project and kiln's cache, a TCP server
on 127.0.0.1, an API key in this process's environment); `tests/sandbox/hostile.py` tries them all
and writes report.json.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kiln.tools.check import caches
from kiln.tools.sandbox import scratch
from kiln.tools.sandbox.box import Sandbox, sandbox_for

HERE = Path(__file__).parent
REPO = HERE.parents[1]
KEY = "sk-kiln-sandbox-test-" + uuid.uuid4().hex


@pytest.fixture(scope="session")
def box() -> Sandbox:
    """The sandbox of this machine: CI installs bubblewrap, so every layer must be in force."""
    b = sandbox_for("best-effort")
    assert b.record.complete, f"sandbox incomplete here (kiln doctor says why): {b.record.missing}"
    return b


class Planted:
    """Files, a listening socket and a key a confined worker must not reach."""

    def __init__(self, base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        tag = uuid.uuid4().hex[:12]
        self.tag = tag
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        self.home_secret = Path.home() / f".kiln-sandbox-secret-{tag}"
        self.home_secret.write_text("home secret")
        run_dir = base / "runs" / "some-run"
        run_dir.mkdir(parents=True)
        (run_dir / "run.json").write_text("run secret")
        self.sibling = scratch.root() / f"check-test-{tag}" / "reference"
        self.sibling.mkdir(parents=True)
        (self.sibling / "outputs.pt").write_text("reference outputs")
        other_cand = caches.root() / "cand" / f"other-{tag}"
        other_cand.mkdir(parents=True, exist_ok=True)
        self.cleanup = [self.home_secret, run_dir, self.sibling.parent, other_cand]
        self.writes = {"home": Path.home() / f".kiln-sandbox-pwned-{tag}",
                       "project": REPO / f".kiln-sandbox-pwned-{tag}",
                       "kiln_cache": caches.root() / f".kiln-sandbox-pwned-{tag}",
                       "other_candidate_cache": other_cand / "poisoned",
                       "sibling": self.sibling / "forged.pt",
                       "kiln_control": scratch.ctl_dir() / f"forged-{tag}.status"}  # exit codes kiln reads
        self.cleanup += list(self.writes.values())
        self.reads = {"home": self.home_secret, "run_dir": run_dir / "run.json", "sibling": self.sibling / "outputs.pt"}
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.listener.setblocking(False)

    def targets(self, **extra: object) -> dict:
        return {"port": self.listener.getsockname()[1], "kiln_pid": os.getpid(), "key": KEY,
                "write": {k: str(v) for k, v in self.writes.items()},
                "read": {k: str(v) for k, v in self.reads.items()}, **extra}

    def accepted(self) -> bool:
        try:
            conn, _ = self.listener.accept()
        except BlockingIOError:
            return False
        conn.close()
        return True

    def close(self) -> None:
        self.listener.close()
        for path in self.cleanup:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Planted]:
    p = Planted(tmp_path, monkeypatch)
    yield p
    p.close()


def stage(shared: Path, targets: dict) -> Path:
    """The hostile module and its targets in a (shared, read-only for the worker) dir."""
    shared.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "hostile.py", shared / "hostile.py")
    (shared / "targets.json").write_text(json.dumps(targets))
    return shared / "hostile.py"


def host_processes_with(token: str) -> list[int]:
    """Host pids whose command line contains `token` (a daemon the worker left behind)."""
    out = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        with contextlib.suppress(OSError):
            if token.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.append(int(pid))
    return out


def gone_within(token: str, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while host_processes_with(token) and time.monotonic() < end:
        time.sleep(0.05)
    return not host_processes_with(token)


def assert_contained(report: dict, planted: Planted) -> None:
    """Every escape in hostile.py failed."""
    bad = {k: v for k, v in report.items() if (k.startswith(("read:", "signal:", "unix:")) or k == "tcp")
           and str(v).startswith("ok")}
    assert not bad, f"escapes that worked: {bad}"
    assert not planted.accepted(), "the worker reached the test's TCP server"
    # A write is judged by where it lands: one the worker saw succeed went to its own private
    # tmpfs when the target lies under /tmp (a project cloned there), which is containment.
    landed = {k: str(p) for k, p in planted.writes.items() if p.exists()}
    assert not landed, f"writes that landed on the host: {landed} (the worker saw {report})"
    assert report["environ"] != "ok" and not str(report["environ"]).startswith("ok"), report["environ"]
    assert report["key_seen"] == [], f"the planted API key is readable at {report['key_seen']}"
    assert "root:" not in str(report["shadow"]), "/etc/shadow is readable"


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    import sys

    return subprocess.run([sys.executable, "-m", "kiln.evals.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def report_of(work: Path) -> Path:
    """hostile.py's report: in its working dir, made first by the test where the worker's own dir is
    locked (a check's workers may fill files there, not create them)."""
    return work / "report.json"
