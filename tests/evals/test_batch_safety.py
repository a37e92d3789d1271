"""A batch directory is guarded: one writer at a time, a damaged or emptied store is refused with one
line, a sample that fails after paying for LLM calls keeps its tokens and its reason, and a rerun
with other settings names them."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kiln.evals.batch.jobs import BatchConfig
from kiln.evals.batch.problems import folder_problems
from kiln.evals.batch.run import Batch, changed_settings
from kiln.evals.batch.store import ResultStore
from kiln.tools.errors import KilnInputError

KB_ROOT = Path(__file__).parents[1] / "fixtures" / "kernelbench"
RELU = KB_ROOT / "KernelBench" / "level1" / "19_ReLU.py"
HOLD = ("import sys, time; from pathlib import Path; from kiln.evals.batch.run import lock_batch; "
        "fh = lock_batch(Path(sys.argv[1])); print('held', flush=True); time.sleep(60)")


def kiln(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kiln.evals.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_a_second_eval_into_the_same_out_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        second = kiln("eval", str(RELU), "--mode", "oneshot", "--llm", "builtin", "--device", "cpu", "--out", str(out))
        assert second.returncode == 2, second.stderr[-2000:]
        assert "another kiln eval is running into" in second.stderr and f"pid {holder.pid}" in second.stderr
        assert second.stderr.strip().count("\n") == 0 and not (out / "results.sqlite").exists()
    finally:
        holder.kill()
        holder.wait()
    # the holder is gone: the directory is free again
    batch = Batch(out, folder_problems(RELU), BatchConfig(mode="oneshot", llm="builtin", device="cpu"), evaluator=None,
                  concurrency=1)
    batch.store.close()


def test_a_truncated_store_is_refused_in_one_line(filled_run: Path) -> None:
    db = filled_run / "results.sqlite"
    data = db.read_bytes()
    assert len(data) > 8192
    db.write_bytes(data[: len(data) // 2])
    with pytest.raises(KilnInputError, match="is damaged"):
        ResultStore(db)
    report = kiln("report", str(filled_run))
    assert report.returncode == 2 and "is damaged" in report.stderr and "Traceback" not in report.stderr


def test_an_emptied_store_next_to_finished_work_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    (out / "problems" / "level1__19_ReLU" / "sample0").mkdir(parents=True)
    (out / "results.sqlite").write_bytes(b"")
    with pytest.raises(KilnInputError, match="is empty, but .* holds a batch's work"):
        ResultStore(out / "results.sqlite")
    fresh = tmp_path / "fresh" / "results.sqlite"  # a new batch still starts normally
    ResultStore(fresh).close()


class BrokenPool:
    """An evaluator whose workers are gone: every check raises (after the Coder was paid)."""

    def check(self, problem, candidate, options):  # noqa: ANN001, ANN201
        raise KeyError()


def test_a_sample_failing_after_llm_calls_keeps_tokens_and_reason(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    code = RELU.read_text().replace("class Model", "class ModelNew").split("batch_size")[0]
    script.write_text(json.dumps({"coder": [{"content": f"```python\n{code}```",
                                             "usage": {"input_tokens": 1200, "output_tokens": 300}}]}))
    cfg = BatchConfig(mode="oneshot", llm=f"scripted:{script}", device="cpu")
    seen: list[str | None] = []
    batch = Batch(tmp_path / "run", folder_problems(RELU), cfg, BrokenPool(), concurrency=1)
    batch.run(lambda outcome, error: seen.append(error))
    [outcome] = batch.store.outcomes()
    assert outcome.status == "error" and outcome.tokens == 1500 and outcome.error == "KeyError"
    assert seen and seen[0].startswith("19_ReLU: KeyError") and "errors.log" in seen[0]
    log = (tmp_path / "run" / "errors.log").read_text()
    assert "Traceback" in log and "KeyError" in log


def test_other_settings_are_named() -> None:
    old = BatchConfig(mode="agent", llm="builtin", trials=5, max_iters=8).model_dump()
    new = BatchConfig(mode="agent", llm="builtin", trials=1, max_iters=8).model_dump()
    assert changed_settings(old, new) == ["loop.check.trials: 5 -> 1"]
    flat_old = {"mode": "agent", "samples": 1, "llm": "builtin", "trials": 5}  # a store from before the change
    assert changed_settings(flat_old, new) == ["loop.check.trials: 5 -> 1"]


def test_rerun_with_other_settings_says_which(tmp_path: Path) -> None:
    out = tmp_path / "run"
    Batch(out, folder_problems(RELU), BatchConfig(mode="oneshot", llm="builtin", device="cpu", trials=2),
          evaluator=None, concurrency=1).store.close()
    time.sleep(0.1)
    proc = kiln("eval", str(RELU), "--mode", "oneshot", "--llm", "builtin", "--device", "cpu", "--trials", "3",
                "--out", str(out))
    assert proc.returncode == 2 and "loop.check.trials: 2 -> 3" in proc.stderr, proc.stderr[-2000:]
