"""Resume after an interruption without redoing finished evaluations: an exception inside a node
(in-process), and a real `kiln run` killed mid-run, then `kiln run --resume`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
from graph_helpers import PROBLEM, CountingEvaluator, judge, kernel, reply, roles, run

from kiln.agents.base import GpuFacts
from kiln.agents.scripted import ScriptedCoder, ScriptedJudge, ScriptedProposer
from kiln.graphs.roles import Roles
from kiln.graphs.rundir import events
from kiln.graphs.runner import resume_run


class CrashingJudge(ScriptedJudge):
    def decide(self, inp):
        raise RuntimeError("the Judge's process went away")


def test_resume_after_an_exception_in_a_node(tmp_path):
    first = roles([reply("no_relu")], [judge("repair")])
    first.judge = CrashingJudge([judge("repair")])
    with pytest.raises(RuntimeError, match="went away"):
        run(tmp_path, first)
    run_dir = tmp_path / "run"
    assert not (run_dir / "summary.json").exists()

    ev = CountingEvaluator()
    second = Roles(ScriptedCoder([reply("good")]), ScriptedJudge([judge("repair")]), ScriptedProposer([{"cases": []}]))
    summary = resume_run(run_dir, roles=second, evaluator=ev, gpu=GpuFacts())

    assert summary.status == "solved" and summary.best.candidate == "c0002"
    assert [t.mode for t in second.coder.tasks] == ["repair"]  # the first Coder round was not redone
    assert [src for src, _ in ev.calls] == [kernel("good")]  # nor was the first candidate's check
    assert "Mismatch" in second.coder.tasks[0].feedback


def _kiln(*args: str) -> subprocess.Popen:
    env = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true"}  # checkpoints load only schema-named types
    return subprocess.Popen([sys.executable, "-m", "kiln.evals.cli", "run", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_for(run_dir, kind: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(e["kind"] == kind for e in events(run_dir)):
            return
        time.sleep(0.2)
    raise AssertionError(f"no {kind} event within {timeout_s} s")


def test_killed_kiln_run_resumes_without_repeating_checks(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"coder": [reply("no_relu"), reply("good")], "judge": [judge("repair")],
                                  "proposer": [{"cases": []}]}))
    run_dir = tmp_path / "run"
    proc = _kiln(str(PROBLEM), "--llm", f"replay:{script}", "--device", "cpu", "--out", str(run_dir), "--trials", "1", "--quiet")
    _wait_for(run_dir, "check")
    os.killpg(proc.pid, signal.SIGKILL)  # a crash: no cleanup, evaluator children included
    proc.wait()
    assert not (run_dir / "summary.json").exists()

    done = _kiln("--resume", str(run_dir), "--quiet")
    out, err = done.communicate(timeout=300)
    assert done.returncode == 0, err
    assert "status: solved" in out
    assert "unregistered" not in err and "blocked" not in err.lower()

    log = events(run_dir)
    fresh = Counter(e["key"] for e in log if e["kind"] == "check")
    assert fresh and max(fresh.values()) == 1  # no evaluation ran twice
    assert [e["kind"] for e in log].count("resume") == 1
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["best"]["candidate"] == "c0002" and summary["status"] == "solved"
    assert (run_dir / "best_kernel.py").read_text() == kernel("good")
