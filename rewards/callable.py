"""KilnReward: a batch of completions in, one reward each out, through kiln's check."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

from kiln.agents.extract import extract_code
from kiln.evals.curriculum.rewards import RewardParams, SampleReward, group_rewards
from kiln.tools.evaluator import Evaluator
from kiln.tools.inputs import derive_seed
from kiln.tools.records import CheckOptions, CheckRecord

REWARD_TIMING = {"timing_laps_s": 0.4, "timing_target_pct": 3.0}
"""A reward's timing, unless its options say otherwise: each function's laps stop at a 3 % CI (a full
check: 1 %) or 0.4 s (1.5 s). A GRPO group's speed gate needs the order of its samples, not a 1 %
figure, and the timing stage (one per GPU at a time) bounds a reward loop's rate; the record's CI
says what precision a figure has."""


def completion_code(completion: Any) -> str:
    """The candidate in a completion: TRL passes text, or a list of chat messages (the last
    assistant message counts). The fenced python block when there is one, else the whole text
    (which kiln's check then records as a compile error)."""
    if isinstance(completion, list):
        texts = [m.get("content", "") for m in completion if isinstance(m, dict) and m.get("role") == "assistant"]
        completion = texts[-1] if texts else ""
    text = str(completion)
    found = extract_code(text)
    return found.code if found.ok and found.code else text


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()  # a completion may hold anything


class CheckCache:
    """(problem, candidate, options, seed) -> CheckRecord, in SQLite (thread-safe), or in memory."""

    def __init__(self, path: Path | None) -> None:
        self._lock = threading.Lock()
        self._mem: dict[str, str] = {}
        self._db = None
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
            self._db.execute("CREATE TABLE IF NOT EXISTS checks (key TEXT PRIMARY KEY, record TEXT NOT NULL)")

    def get(self, key: str) -> CheckRecord | None:
        with self._lock:
            text = self._mem.get(key)
            if text is None and self._db is not None:
                row = self._db.execute("SELECT record FROM checks WHERE key = ?", (key,)).fetchone()
                text = row[0] if row else None
        return CheckRecord.model_validate_json(text) if text else None

    def put(self, key: str, rec: CheckRecord) -> None:
        with self._lock:
            self._mem[key] = rec.model_dump_json()
            if self._db is not None:
                self._db.execute("INSERT OR REPLACE INTO checks VALUES (?, ?)", (key, self._mem[key]))


class KilnReward:
    """A reward function for TRL (`reward_funcs=[KilnReward(...)]`), callable on a batch.

    The dataset needs a column (default `problem`) holding each prompt's KernelBench module source;
    TRL passes it as a keyword argument. Completions that share a prompt form a group (the GRPO
    group): the speed gate is applied per group. Call `records` after a batch for the check records.

    `checks_per_gpu` (local executor): checks in flight per GPU. 1 (the default) runs one at a time, so
    nothing else is on the GPU while a sample is timed; more overlap the samples' compiles and trials
    (only the timings take turns), for throughput, and a sample's timing may then share the GPU with a
    sibling's kernels: its record says so (`timing.env.other_gpu_processes`, and a reason).
    """

    __name__ = "kiln_reward"

    def __init__(self, *, evaluator: Evaluator | None = None, device: str = "auto", executor: str = "local",
                 ray_address: str | None = None, options: CheckOptions | None = None,
                 params: RewardParams | None = None, seed: int = 0, cache: Path | str | None = None,
                 timeout_s: float = 300.0, max_workers: int | None = None, problem_key: str = "problem",
                 checks_per_gpu: int = 1) -> None:
        if evaluator is None:
            from kiln.evals.curriculum.executors import build_executors
            from kiln.tools.device import resolve_device

            device = resolve_device(device)  # the reward's entry point (a Python API): resolved once, here
            evaluator, _ = build_executors(executor, device, ray_address=ray_address, checks_per_gpu=checks_per_gpu)
        elif device == "auto":
            device = "cpu"
        self.evaluator = evaluator
        self.options = (options or CheckOptions(**REWARD_TIMING)).model_copy(update={"device": device,
                                                                                   "timeout_s": timeout_s})
        self.params, self.seed, self.timeout_s = params or RewardParams(), seed, timeout_s
        self.cache = CheckCache(Path(cache) if cache else None)
        self.max_workers = max_workers or max(1, int(getattr(evaluator, "n_slots", 1)))
        self.problem_key = problem_key
        self.records: list[CheckRecord] = []
        self.details: list[SampleReward] = []

    def __call__(self, prompts: list[Any] | None = None, completions: list[Any] | None = None,
                 **kwargs: Any) -> list[float]:
        completions = completions or []
        problems = kwargs.get(self.problem_key)
        if problems is None or len(problems) != len(completions):
            raise ValueError(f"KilnReward needs a `{self.problem_key}` column with one module source per completion")
        codes = [completion_code(c) for c in completions]
        self.records = self.check_batch([str(p) for p in problems], codes)
        keys = [json.dumps(p, sort_keys=True, default=str) for p in (prompts or problems)]
        self.details = [SampleReward(reward=0.0)] * len(codes)
        for key in dict.fromkeys(keys):
            idx = [i for i, k in enumerate(keys) if k == key]
            for i, rew in zip(idx, group_rewards([self.records[i] for i in idx], self.params), strict=True):
                self.details[i] = rew
        return [d.reward for d in self.details]

    def check_batch(self, problems: list[str], codes: list[str]) -> list[CheckRecord]:
        with ThreadPoolExecutor(max_workers=self.max_workers) as pool:
            futures = [pool.submit(self.check_one, p, c) for p, c in zip(problems, codes, strict=True)]
            return [self._result(f, p, c) for f, p, c in zip(futures, problems, codes, strict=True)]

    def _result(self, fut: Any, problem: str, code: str) -> CheckRecord:
        """One sample's record; whatever its check raised is that sample's `error`, never the batch's
        (a completion nested too deeply, or holding a lone surrogate, took its neighbours' rewards
        down with it)."""
        try:
            return fut.result(timeout=2 * self.timeout_s + 60)
        except FutureTimeout:
            return CheckRecord(problem="<problem>", candidate="<completion>", status="timeout",
                               reasons=[f"no verdict within {2 * self.timeout_s + 60:.0f} s"])
        except Exception as exc:  # noqa: BLE001 - one sample's failure, a zero reward with its reason
            return CheckRecord(problem="<problem>", candidate="<completion>", status="error",
                               reasons=[f"kiln could not check this completion ({type(exc).__name__}: "
                                        f"{str(exc)[:300]})"])

    def check_one(self, problem: str, code: str) -> CheckRecord:
        opts = self.options.model_copy(update={"seed": derive_seed(self.seed, _sha(problem), _sha(code))})
        key = _sha(json.dumps([problem, code, opts.model_dump(mode="json")]))
        if (hit := self.cache.get(key)) is not None:
            return hit
        with tempfile.TemporaryDirectory(prefix="kiln-reward-") as tmp:
            prob, cand = Path(tmp) / "problem.py", Path(tmp) / "candidate.py"
            prob.write_text(problem)
            cand.write_text(code, encoding="utf-8", errors="replace")
            rec = self.evaluator.check(prob, cand, opts)
        if rec.status not in ("error", "timeout"):  # kiln's failure or the machine's load, not a verdict to keep
            self.cache.put(key, rec)
        return rec
