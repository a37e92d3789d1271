"""Helpers for the UI tests and `bench/ui_bench.py`: the recorded run, a batch synthesised from its
real check records through the real store, and `kiln ui` served from a real subprocess. (A module
of its own name: one named `conftest` clashes with other folders' when pytest runs several.)"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURE_RUN = REPO / "tests" / "fixtures" / "ui" / "runs" / "relu-mcts"
FAKE_KEY = "sk-kilnUiFakeKey0123456789abcdefXYZ"  # what tests/ui/record_fixtures.py planted
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"  # screenshots (git-ignored)


def fixture_statuses(run: Path = FIXTURE_RUN) -> dict[str, str]:
    """Each candidate's status as the graph itself exported it (rewards.jsonl), not as the UI reads it."""
    lines = (run / "rewards.jsonl").read_text().splitlines()
    return {row["candidate"]: row["status"] for row in map(json.loads, lines)}


def synth_batch(dest: Path, n: int, run: Path = FIXTURE_RUN, with_runs: bool = True) -> Path:
    """A finished agent-mode batch of `n` problems: the recorded run's real check records, cycled,
    stored through the real ResultStore; each problem gets a copy of the run as its run folder."""
    from kiln.evals.batch.jobs import BatchConfig, outcome_from_record
    from kiln.evals.batch.store import ResultStore
    from kiln.tools.records import CheckRecord

    checks = sorted(run.glob("candidates/*/check.json"))
    records = [CheckRecord.model_validate_json(p.read_text()) for p in checks]
    store = ResultStore(dest / "results.sqlite")
    store.set_meta("config", BatchConfig(mode="agent", strategy="mcts", device="cpu").model_dump())
    keys = [f"level1/{i + 1}_problem_{i % 7}" for i in range(n)]
    store.set_meta("n_expected", n)
    store.set_meta("problems", [{"key": k} for k in keys])
    for i, key in enumerate(keys):
        rec = records[(i * 5) % len(records)].model_copy(update={"problem": key})
        job = dest / "problems" / key.replace("/", "__") / "sample0"
        if with_runs:
            shutil.copytree(run, job / "run")
        store.add_candidate(key, 0, 0, rec, str(job / "run" / "best_kernel.py"))
        store.finish_sample(outcome_from_record(key, 0, rec, tokens=4800 + 37 * i, cost_usd=0.01 + i * 1e-4, wall_s=30.0))
    store.close()
    return dest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except urllib.error.HTTPError:
            return  # it answers (401 / 403 are answers)
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"kiln ui did not answer at {url}")


@contextmanager
def serve(folders: list[Path], *extra: str, env: dict | None = None) -> Iterator[str]:
    """`kiln ui FOLDERS --port P ...` as a real process; yields its base URL."""
    port = free_port()
    cmd = [str(Path(sys.executable).parent / "kiln"), "ui", *map(str, folders), "--port", str(port), *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        wait_up(f"http://127.0.0.1:{port}/static/kiln.css")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def get(url: str, headers: dict | None = None) -> tuple[int, str, dict]:
    """(status, body, headers) without following redirects."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - urllib's signature
            return None

    opener = urllib.request.build_opener(NoRedirect)
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with opener.open(req, timeout=30) as res:
            return res.status, res.read().decode(), dict(res.headers)
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(), dict(err.headers)


# Real KernelBench level-1 names (long, without spaces) and what each sample ended as.
KERNELBENCH_ROWS = [
    ("level1/19_ReLU", "c0004", None),
    ("level1/23_Softmax", "c0001", None),
    ("level1/40_LayerNorm", "timeout", None),
    ("level1/50_conv_standard_2D__square_input__square_kernel", None, "unsupported by the built-in coder: module `Conv2d`"),
    ("level1/51_Argmax_over_a_dimension", None, "unsupported by the built-in coder: op `argmax`"),
    ("level1/62_conv_standard_2D__square_input__asymmetric_kernel", "c0002", None),
    ("level1/76_conv_standard_1D_dilated_strided__", "c0006", None),
    ("level1/95_CrossEntropyLoss", None, "unsupported by the built-in coder: tensor method `.unsqueeze`"),
]
TIMEOUT_REASON = ("timed out in stage compile (candidate import and first call): the stage exceeded its 150 s budget "
                  "(a trial took 146.2 s under Triton's interpreter)")


def kernelbench_batch(dest: Path, run: Path = FIXTURE_RUN) -> Path:
    """A finished agent-mode CPU batch under real KernelBench names, set up by the real Batch (its
    config, problem list and environment) and filled through its real store: the recorded run's check
    records (ok, incorrect, compile error, rejected), one timeout, and three problems the built-in
    Coder does not support (no check record: the reason is the outcome's)."""
    from kiln.evals.batch.jobs import BatchConfig, outcome_from_record
    from kiln.evals.batch.problems import ProblemRef
    from kiln.evals.batch.run import Batch
    from kiln.tools.records import CheckRecord

    def record(cid: str) -> CheckRecord:
        return CheckRecord.model_validate_json((run / "candidates" / cid / "check.json").read_text())

    refs = [ProblemRef(key=k, path=f"/kb/KernelBench/{k}.py") for k, _, _ in KERNELBENCH_ROWS]
    cfg = BatchConfig(mode="agent", strategy="linear", device="cpu", max_iters=3)
    batch = Batch(dest, refs, cfg, evaluator=None, concurrency=1)  # type: ignore[arg-type] - never run
    for key, cid, why in KERNELBENCH_ROWS:
        rec = None
        if cid == "timeout":
            rec = record("c0001").model_copy(update={"status": "timeout", "correct": False, "reasons": [TIMEOUT_REASON]})
        elif cid:
            rec = record(cid)
        if rec is not None:
            rec = rec.model_copy(update={"problem": key})
            batch.store.add_candidate(key, 0, 0, rec, None)
        status = None if rec else "unsupported"
        batch.store.finish_sample(outcome_from_record(key, 0, rec, status=status, reason=why, wall_s=12.5))
    batch.store.close()
    batch._lock.close()
    return dest
