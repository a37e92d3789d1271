"""`kiln run` as a user runs it: a planted API key never reaches the run directory or the output;
bad input is one clear line and exit 2."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

import pytest
from graph_helpers import PROBLEM, judge, kernel

REQUIRED = {"status", "best", "iterations", "tokens", "cost_usd", "per_iteration"}


def kiln_run(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kiln.evals.cli", "run", *args], env=env or os.environ.copy(),
                          capture_output=True, text=True, timeout=timeout)


def _script(kind: str, key: str) -> dict:
    leaky = kernel("good").replace('"""Correct:', f'"""key {key}. Correct:')
    coder = [f"Using key {key}.\n```python\n{leaky}```"]
    if kind == "replay":  # role-level fakes
        return {"coder": coder, "judge": [judge("repair", diagnosis=f"the key is {key}")],
                "proposer": [{"cases": [], "error": f"no cases ({key})"}]}
    return {"coder": coder, "proposer": [{"structured": {"cases": []}, "content": f"key {key}"}],
            "judge": [{"structured": {**judge("repair", diagnosis=f"the key is {key}"), "bottleneck": None,
                                      "evidence": [key], "stop_reason": None}}]}


@pytest.mark.parametrize("kind", ["replay", "scripted"])  # role fakes; LLM roles on scripted chat models
def test_planted_api_key_never_lands_in_the_run_dir(tmp_path, kind):
    key = "sk-planted-" + secrets.token_hex(16)
    script = tmp_path / "script.json"
    script.write_text(json.dumps(_script(kind, key)))
    env = {**os.environ, "OPENAI_API_KEY": key, "KILN_TEST_TOKEN": key}
    run_dir = tmp_path / "run"
    done = kiln_run(str(PROBLEM), "--llm", f"{kind}:{script}", "--device", "cpu", "--out", str(run_dir),
                    *(["--base-url", f"http://user:{key}@127.0.0.1:9/v1"] if kind == "replay" else []),
                    "--trials", "1", "--quiet", env=env)
    assert done.returncode == 0, done.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary.keys() >= REQUIRED and summary["status"] == "solved"
    assert summary["best"]["correct"] and summary["best"]["speedup_vs_compile"] is None
    assert summary["speed_measured"] is False and "not measured" in summary["note"]
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert len(files) > 8 and any(p.suffix == ".sqlite" for p in files)
    for path in files:
        assert key.encode() not in path.read_bytes(), f"key leaked into {path}"
    assert key not in done.stdout + done.stderr
    assert "[REDACTED]" in (run_dir / "best_kernel.py").read_text()


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    missing = kiln_run(str(tmp_path / "nope.py"), "--device", "cpu")
    assert missing.returncode == 2 and missing.stderr.strip().count("\n") == 0
    assert "problem file not found" in missing.stderr
    bad = kiln_run(str(PROBLEM), "--strategy", "sideways", "--device", "cpu", "--out", str(tmp_path / "r"))
    assert bad.returncode == 2 and "strategy" in bad.stderr and "Traceback" not in bad.stderr
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\n\n\nclass Model(torch.nn.Module):\n    pass\n")
    bad_problem = kiln_run(str(broken), "--device", "cpu", "--out", str(tmp_path / "b"))
    assert bad_problem.returncode == 2 and "get_inputs" in bad_problem.stderr and "Traceback" not in bad_problem.stderr
    assert not (tmp_path / "b").exists()
    not_run = kiln_run("--resume", str(tmp_path))
    assert not_run.returncode == 2 and "not a kiln run directory" in not_run.stderr


def test_summary_line_names_the_cost_honestly(capsys) -> None:
    from types import SimpleNamespace

    from kiln.graphs.cli import _print_summary

    best = SimpleNamespace(speedup_vs_eager=None, speedup_vs_compile=None, path=None, correct=False)

    def line(cost, tokens):
        _print_summary(SimpleNamespace(best=best, status="budget", stop_reason="x", iterations=1, tokens=tokens,
                                       cost_usd=cost, run_dir="r"))
        return capsys.readouterr().out.splitlines()[-1]

    assert "no LLM cost" in line(None, 0)  # built-in policies: nothing billed, not "unknown"
    assert "cost unknown" in line(None, 1200)  # a model kiln has no price for
    assert "$0.0123" in line(0.0123, 1200)


@pytest.mark.slow
def test_ctrl_c_is_answered_at_once_and_the_run_can_resume(tmp_path):
    """Ctrl-C (SIGINT to the whole foreground group, as a terminal sends it) is acknowledged within a
    second, even while a check is in flight; the run exits 130 naming the --resume command."""
    import signal
    import time

    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "kiln.evals.cli", "run", str(PROBLEM), "--device", "cpu",
                             "--out", str(out), "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not (out / "events.jsonl").exists():
        time.sleep(0.2)
    time.sleep(1.0)  # the first check is in flight
    os.killpg(proc.pid, signal.SIGINT)
    t0 = time.monotonic()
    first = proc.stderr.readline()
    heard = time.monotonic() - t0
    rest = proc.stderr.read()
    assert proc.wait(timeout=120) == 130
    assert first.startswith("kiln: Ctrl-C: stopping the work in flight") and heard < 2.0, (first, heard)
    assert f"kiln run --resume {out}" in rest and "Traceback" not in rest


def test_a_problem_whose_get_inputs_raises_is_one_line(tmp_path):
    broken = tmp_path / "bad_inputs.py"
    broken.write_text(PROBLEM.read_text().replace("return [torch.rand(rows, cols)]",
                                                  "raise ValueError('no inputs for you')"))
    done = kiln_run(str(broken), "--device", "cpu", "--max-iters", "1", "--out", str(tmp_path / "r"), "--quiet")
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr
    assert "get_inputs() raised ValueError: no inputs for you" in done.stderr
