"""Ctrl-C (issue 26, items 4 and 5) on a real `kiln run` subprocess, with a real SIGINT sent to its
process group as a terminal sends it: the run exits within 5 s with no traceback, every process it
started (fork servers, check workers, reference runs) is gone, summary.json says `stopped`, and a
resume redoes nothing that had finished. Races a clock: in SERIAL (tests/conftest.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from graph_helpers import PROBLEM, case_source, judge, reply

from kiln.graphs.rundir import events
from kiln.graphs.stop import descendants

STOP_S = 5.0


def _kiln(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kiln.evals.cli", "run", *args, "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait(run_dir: Path, done: callable, timeout_s: float = 300) -> None:  # type: ignore[valid-type]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if done(events(run_dir) if (run_dir / "events.jsonl").exists() else []):
            return
        time.sleep(0.1)
    raise AssertionError(f"{run_dir}: the awaited event did not come within {timeout_s} s")


def _in_flight(proc: subprocess.Popen, timeout_s: float = 120) -> set[int]:
    """The processes the run has started, once there are some (a check's fork server and worker)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if started := set(descendants(proc.pid)):
            time.sleep(1.0)  # the worker is well into its check
            return started | set(descendants(proc.pid))
        time.sleep(0.1)
    raise AssertionError("no check in flight: nothing to end")


def _ctrl_c(proc: subprocess.Popen) -> tuple[float, str, set[int]]:
    """SIGINT to the group while a check is in flight; (seconds to exit, stderr, pids it had started
    that are still alive)."""
    started = _in_flight(proc)
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    took = time.monotonic() - t0
    time.sleep(0.5)  # SIGKILLed processes are reaped by now
    alive = {p for p in started if Path(f"/proc/{p}").exists() and "zombie" not in _state(p)}
    return took, err, alive


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0].lower()
    except (OSError, IndexError):
        return "zombie"


def _script(tmp_path: Path) -> Path:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"coder": [reply("good")], "judge": [judge("finish")],
                                  "proposer": [{"cases": [{"name": "rows_1023", "source": case_source(1023)}]},
                                               {"cases": []}]}))
    return script


def _stopped_summary(run_dir: Path) -> dict:
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "stopped" and "--resume" in summary["stop_reason"], summary
    return summary


def test_ctrl_c_during_a_check_ends_it_and_stops_in_seconds(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    # 40 trials: the check lasts seconds (with the fork server started beside the Coder, a 2-trial check
    # of this small problem ends within the second the test waits before its Ctrl-C)
    proc = _kiln(str(PROBLEM), "--device", "cpu", "--out", str(run_dir), "--llm", f"replay:{_script(tmp_path)}",
                 "--trials", "40")
    _wait(run_dir, lambda ev: any(e["kind"] == "candidate" for e in ev))
    took, err, alive = _ctrl_c(proc)
    assert proc.returncode == 130 and took < STOP_S, (took, err[-2000:])
    assert "Traceback" not in err and f"kiln run --resume {run_dir}" in err
    assert not alive, f"still running after Ctrl-C: {alive}"
    _stopped_summary(run_dir)
    assert not any(e["kind"] == "check" for e in events(run_dir))  # the cut check was not recorded

    done = _kiln("--resume", str(run_dir))
    out, err = done.communicate(timeout=600)
    assert done.returncode == 0 and "status: solved" in out, err[-2000:]
    checks = [e for e in events(run_dir) if e["kind"] == "check"]
    assert checks and all(e["status"] == "ok" for e in checks), checks


def test_ctrl_c_under_beam_prints_no_traceback(tmp_path: Path) -> None:
    """Interrupted at three points (the first check, the stress round, the re-check): one clean line each time."""
    run_dir = tmp_path / "run"
    marks = [lambda ev: any(e["kind"] == "candidate" for e in ev),
             lambda ev: any(e["kind"] == "hard_rule" for e in ev),
             lambda ev: any(e["kind"] == "case" for e in ev)]
    args = ["--device", "cpu", "--strategy", "beam", "--llm", f"replay:{_script(tmp_path)}"]
    proc = _kiln(str(PROBLEM), "--out", str(run_dir), *args)
    for mark in marks:
        _wait(run_dir, mark)
        took, err, alive = _ctrl_c(proc)
        assert proc.returncode == 130 and took < STOP_S and not alive, (took, alive, err[-2000:])
        assert "Traceback" not in err and "cannot schedule new futures" not in err, err[-3000:]
        _stopped_summary(run_dir)
        proc = _kiln("--resume", str(run_dir))
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0 and "status: solved" in out, err[-2000:]


def test_a_resumed_run_redoes_no_finished_proposer_step(tmp_path: Path) -> None:
    """Ctrl-C while the stress round re-checks the kernel: the Proposer's reply and its case runs are
    kept (proposals/), so the resume neither asks again nor runs the cases again."""
    run_dir = tmp_path / "run"
    proc = _kiln(str(PROBLEM), "--out", str(run_dir), "--device", "cpu", "--llm", f"replay:{_script(tmp_path)}")
    _wait(run_dir, lambda ev: any(e["kind"] == "case" for e in ev))
    took, err, _ = _ctrl_c(proc)  # the re-check with the new case is in flight
    assert proc.returncode == 130 and took < STOP_S, err[-2000:]
    assert not any(e["kind"] == "stress" for e in events(run_dir)), "the stress round had already finished"

    done = _kiln("--resume", str(run_dir))
    out, err = done.communicate(timeout=600)
    assert done.returncode == 0 and "status: solved" in out, err[-2000:]
    log = events(run_dir)
    assert Counter(e["kind"] for e in log)["case"] == 1  # the case ran against the reference once
    assert any(e["kind"] == "proposal_cached" for e in log)
    assert len(list((run_dir / "llm").glob("*_proposer.json"))) == 1  # asked once, not again on resume


def test_a_ctrl_c_after_the_finish_keeps_the_final_summary(tmp_path: Path) -> None:
    """The finish node wrote summary.json, then Ctrl-C came before the process left: it stays solved."""
    import shutil

    from kiln.graphs.runner import mark_stopped

    run_dir = tmp_path / "run"
    shutil.copytree(Path(__file__).parents[1] / "fixtures" / "ui" / "runs" / "relu-mcts", run_dir)
    before = (run_dir / "summary.json").read_text()
    mark_stopped(run_dir)
    assert (run_dir / "summary.json").read_text() == before and json.loads(before)["status"] == "solved"
    (run_dir / "summary.json").unlink()
    mark_stopped(run_dir)  # no summary yet: the stopped one is written from the checkpoint
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "stopped"
