"""Security through the real command lines (`kiln check`, `kiln run`), as a user runs them: a
candidate that kills kiln's fork server, SIGTERM to kiln's process group while a candidate hangs,
and a candidate that steals the API keys of the `kiln run` process while the run goes on. The
command lines have no `run_rejected`: on main the killer and the thief are refused by the
allowlist before they run (the sandbox held against both when executed, in the sandbox branch);
the hanging candidate uses allowed names only, so it runs, inside the sandbox."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest
from redteam_lib import (
    RELU,
    candidate,
    cli_env,
    files_containing,
    honest,
    kill_pids,
    kiln,
    kiln_popen,
    pids_with_cwd_under,
    tcp_sink,
)

pytestmark = pytest.mark.slow


def _reply(path: Path) -> str:
    return f"Here is the kernel.\n\n```python\n{path.read_text()}```\n"


def _replay(user: Path, *kernels: Path) -> Path:
    """A `replay:` script: the Coder answers with these kernels in turn, the Judge asks for a repair."""
    judge = {"mode": "correction", "diagnosis": "scripted", "plan": "", "next": "repair"}
    script = {"coder": [_reply(k) for k in kernels], "judge": [judge] * len(kernels),
              "proposer": [{"cases": []}] * len(kernels)}
    path = user / "script.json"
    path.write_text(json.dumps(script))
    return path


def test_kiln_check_survives_a_candidate_that_kills_the_fork_server(user):
    """Fixed on main (check session): workers answer kiln over their own channels, so losing the fork
    server costs nothing. `ok` is right when the kill changed nothing (or a sandbox made it
    impossible); the point is a record and a verdict, never exit 2 blaming the problem."""
    out = user / "verdict.json"
    done = kiln("check", str(RELU), str(candidate("s_kill_fork_server", user / "project")), "--device", "cpu",
                "--trials", "1", "--json", str(out), env=cli_env(user / "home"), cwd=user / "project")
    assert done.returncode in (0, 1), (done.returncode, done.stderr[-2000:])
    assert json.loads(out.read_text())["status"] in ("ok", "crashed", "rejected")


def test_kiln_run_survives_a_candidate_that_kills_the_fork_server(user):
    """Fixed on main (check session): the run goes on (and `--resume` never meets the same death)."""
    script = _replay(user, candidate("s_kill_fork_server", user / "kernels"), honest(user / "kernels"))
    run_dir = user / "runs" / "killer"
    done = kiln("run", str(RELU), "--llm", f"replay:{script}", "--device", "cpu", "--out", str(run_dir),
                "--trials", "1", "--max-iters", "2", "--quiet", env=cli_env(user / "home"), cwd=user / "project")
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "solved"


def _work_dirs_with(token: str) -> list[Path]:
    """kiln's scratch folders (`kiln-*` in /dev/shm or the temp dir) holding a copy of the candidate
    with `token` in it."""
    found = []
    for root in {Path("/dev/shm"), Path(tempfile.gettempdir())}:
        for d in root.glob("kiln-*"):
            with contextlib.suppress(OSError):
                if any(token in p.read_text() for p in d.rglob("candidate.py")):
                    found.append(d)
    return found


def _wait_for_hanging_candidate(proc, token: str, timeout_s: float = 240) -> list[Path]:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and proc.poll() is None:
        dirs = _work_dirs_with(token)
        if dirs:
            time.sleep(3.0)  # its workers start and import it, and it sleeps
            return dirs
        time.sleep(0.2)
    raise AssertionError(f"the candidate never started (kiln exited {proc.poll()})")


def test_sigterm_leaves_no_work_dir_and_no_orphan(user):
    env = cli_env(user / "home")
    token = secrets.token_hex(8)
    proc = kiln_popen("check", str(RELU), str(candidate("s_hang", user / "project", token=token)), "--device", "cpu",
                      "--trials", "1", env=env, cwd=user / "project")
    dirs: list[Path] = []
    try:
        dirs = _wait_for_hanging_candidate(proc, token)
        os.killpg(proc.pid, signal.SIGTERM)  # kiln's own group only: the test started it in a new session
        proc.communicate(timeout=60)
        time.sleep(3)
        left = [d for d in dirs if d.exists()] + [f"pid {p}" for d in dirs for p in pids_with_cwd_under(d)]
        if left:  # "cleaned at the next start" counts too
            kiln("check", str(RELU), str(honest(user / "project")), "--device", "cpu", "--trials", "1", env=env,
                 cwd=user / "project")
            left = [d for d in dirs if d.exists()] + [f"pid {p}" for d in dirs for p in pids_with_cwd_under(d)]
        assert not left, f"left behind after SIGTERM and a later check: {left}"
    finally:
        for d in dirs:
            kill_pids(pids_with_cwd_under(d))
            shutil.rmtree(d, ignore_errors=True)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_api_keys_never_leave_kiln_run(user):
    keys = {"OPENAI_API_KEY": "sk-redteam-canary-" + secrets.token_hex(12),
            "ANTHROPIC_API_KEY": "sk-ant-redteam-canary-" + secrets.token_hex(12)}
    (user / "tmp").mkdir()
    run_dir = user / "runs" / "thief"
    with tcp_sink() as sink:
        script = _replay(user, candidate("s_steal_keys", user / "kernels", port=sink.port))
        done = kiln("run", str(RELU), "--llm", f"replay:{script}", "--device", "cpu", "--out", str(run_dir),
                    "--trials", "1", "--max-iters", "1", "--quiet",
                    env=cli_env(user / "home", TMPDIR=str(user / "tmp"), **keys), cwd=user / "project")
        sent = list(sink.accepted)
    leaks = [f"{p} holds {name}" for name, key in keys.items() for p in files_containing(user, key.encode())]
    leaks += [f"sent {name} over TCP" for name, key in keys.items() for data in sent if key.encode() in data]
    leaks += [f"{name} in kiln's output" for name, key in keys.items() if key in done.stdout + done.stderr]
    assert not leaks, leaks
    assert not sent, f"the candidate connected out: {sent}"
    assert done.returncode in (0, 1), (done.returncode, done.stderr[-2000:])  # solved or not: a verdict, no crash
    assert (run_dir / "summary.json").exists()
