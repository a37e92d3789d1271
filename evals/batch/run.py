"""Run a batch: many (problem, sample) jobs in flight, evaluations through GPU slots, a resumable
SQLite store, a live progress display, a whole-batch budget, and `metrics.json` at the end."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
import traceback
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import IO

from pydantic import BaseModel

from kiln.evals.batch.jobs import BatchConfig, JobResult, check_options, job_dir_of, run_job, spent_in
from kiln.evals.batch.metrics import ProblemOutcome, SampleOutcome, summarize
from kiln.evals.batch.problems import ProblemRef
from kiln.evals.batch.store import ResultStore
from kiln.tools.errors import KilnInputError
from kiln.tools.evaluator import Evaluator
from kiln.tools.records import JSON_SAFE

JobFn = Callable[[ProblemRef, int, BatchConfig, Evaluator, Path], JobResult]


class BatchBudget(BaseModel):
    """Whole-batch limits: once one is spent, no new job starts; jobs in flight finish."""

    model_config = JSON_SAFE

    usd: float | None = None
    tokens: int | None = None
    minutes: float | None = None

    def spent(self, outcomes: list[SampleOutcome], elapsed_s: float) -> str | None:
        tokens = sum(o.tokens for o in outcomes)
        cost = sum(o.cost_usd or 0.0 for o in outcomes)
        if self.tokens is not None and tokens >= self.tokens:
            return f"batch token budget spent ({tokens} >= {self.tokens})"
        if self.usd is not None and cost >= self.usd:
            return f"batch cost budget spent (${cost:.2f} >= ${self.usd:.2f})"
        if self.minutes is not None and elapsed_s >= self.minutes * 60:
            return f"batch time budget spent ({elapsed_s / 60:.1f} >= {self.minutes} min)"
        return None


def group(outcomes: list[SampleOutcome]) -> list[ProblemOutcome]:
    by_problem: dict[str, list[SampleOutcome]] = {}
    for o in outcomes:
        by_problem.setdefault(o.problem, []).append(o)
    return [ProblemOutcome(problem=k, samples=v) for k, v in sorted(by_problem.items())]


def _flat(data: object, prefix: str = "") -> dict[str, object]:
    if isinstance(data, dict):
        out: dict[str, object] = {}
        for k, v in data.items():
            out |= _flat(v, f"{prefix}{k}.")
        return out
    return {prefix.rstrip("."): data}


def changed_settings(old: dict, new: dict) -> list[str]:
    """`loop.check.trials: 5 -> 1` for every setting that differs (older stores' flat keys are
    read through today's model first, so only real changes are named)."""
    with contextlib.suppress(ValueError):
        old = BatchConfig.model_validate(old).model_dump()
    a, b = _flat(old), _flat(new)
    return [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k)]


def _check_config(store: ResultStore, cfg: BatchConfig) -> None:
    old = store.get_meta("config")
    if old is None:
        store.set_meta("config", cfg.model_dump())
        return
    changes = changed_settings(old, cfg.model_dump())
    if changes:
        shown = "; ".join(changes[:4]) + (f"; and {len(changes) - 4} more" if len(changes) > 4 else "")
        raise KilnInputError(f"{store.path.parent} holds a batch with other settings ({shown}); rerun with the "
                             "same settings to continue it, or use another --out to start fresh")


def write_metrics(run_dir: Path, store: ResultStore, cfg: BatchConfig, *, timed: bool, stopped: str | None,
                  elapsed_s: float | None = None, done_now: int = 0) -> dict:
    problems = group(store.outcomes())
    ks = [k for k in (1, 5, 10) if k <= cfg.samples] or [1]
    metrics = summarize(problems, ks, timed=timed)
    metrics.update({"mode": cfg.mode, "stopped": stopped, "n_expected": store.get_meta("n_expected")})
    if elapsed_s:
        # throughput of this invocation only (a resumed batch counts what it finished itself)
        metrics["throughput"] = {"elapsed_s": round(elapsed_s, 1), "samples_done": done_now,
                                 "samples_per_hour": round(done_now * 3600 / elapsed_s, 1)}
    tmp = run_dir / "metrics.json.tmp"
    tmp.write_text(json.dumps(metrics, indent=2))
    tmp.replace(run_dir / "metrics.json")
    return metrics


def error_line(err: BaseException) -> str:
    """One line naming a job's failure, never empty (`KeyError()` says nothing on its own)."""
    text = " ".join(str(err).split())[:500]
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def lock_batch(run_dir: Path) -> IO[str]:
    """Hold `run_dir/batch.lock` for this process: two `kiln eval` runs into one --out would both run
    every sample and pay for every LLM call twice. Released when the process ends."""
    fh = (run_dir / "batch.lock").open("a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().strip() or "another process"
        fh.close()
        raise KilnInputError(f"another kiln eval is running into {run_dir} ({holder}); wait for it to finish, "
                             "or use another --out") from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"pid {os.getpid()}")
    fh.flush()
    return fh


class Batch:
    def __init__(self, run_dir: Path, problems: list[ProblemRef], cfg: BatchConfig, evaluator: Evaluator,
                 *, concurrency: int, budget: BatchBudget | None = None, job_fn: JobFn = run_job) -> None:
        self.run_dir = run_dir
        self.problems = problems
        self.cfg = cfg
        self.evaluator = evaluator
        self.concurrency = max(1, concurrency)
        self.budget = budget or BatchBudget()
        self.job_fn = job_fn
        run_dir.mkdir(parents=True, exist_ok=True)
        self._lock = lock_batch(run_dir)
        self.store = ResultStore(run_dir / "results.sqlite")
        _check_config(self.store, cfg)
        self.store.set_meta("n_expected", len(problems) * cfg.samples)
        self.store.set_meta("problems", [p.model_dump() for p in problems])
        self._record_env()
        self.stopped: str | None = None
        self.elapsed_s = 0.0
        self.done_now = 0

    def _record_env(self) -> None:
        """Where the batch runs (torch, Triton, Python, the GPU): a CPU check records no environment
        of its own, and the report should not then say there is none."""
        if self.store.get_meta("env") is None:
            from kiln.tools.gpuenv import env_record

            self.store.set_meta("env", env_record(self.cfg.loop.device).model_dump())

    def pending(self) -> list[tuple[ProblemRef, int]]:
        return [(p, s) for p in self.problems for s in range(self.cfg.samples) if not self.store.is_done(p.key, s)]

    def _record(self, result: JobResult) -> None:
        for row in result.candidates:
            self.store.add_candidate(result.outcome.problem, result.outcome.sample, row.candidate, row.record,
                                     row.source_path)
            self._cache_baseline(result.outcome.problem, row.record)
        self.store.finish_sample(result.outcome, result.best_path)

    def _cache_baseline(self, problem: str, record) -> None:  # noqa: ANN001 - CheckRecord
        timing, env = record.timing, record.timing.env if record.timing else None
        if not timing or not timing.measured or not env:
            return
        ref = next((p for p in self.problems if p.key == problem), None)
        key = "|".join(str(x) for x in (env.gpu_name, env.driver, env.torch, env.triton, record.dtype,
                                         ref.sha256 if ref else problem))
        self.store.put_baseline(key, problem, {b: s.model_dump() for b, s in timing.baselines.items()})

    def run(self, on_progress: Callable[[SampleOutcome | None, str | None], None] | None = None) -> None:
        todo = self.pending()
        start = time.monotonic()
        warm = getattr(self.evaluator, "warm", None)
        if todo and callable(warm):  # fork servers start while the first candidates are written
            warm(check_options(self.cfg))
        notify = on_progress or (lambda outcome, error: None)
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            inflight: dict[Future, tuple[ProblemRef, int]] = {}
            while todo or inflight:
                while todo and len(inflight) < self.concurrency and not self.stopped:
                    problem, sample = todo.pop(0)
                    fut = pool.submit(self.job_fn, problem, sample, self.cfg, self.evaluator, self.run_dir)
                    inflight[fut] = (problem, sample)
                if not inflight:
                    break
                done, _ = wait(inflight, return_when=FIRST_COMPLETED)
                for fut in done:
                    problem, sample = inflight.pop(fut)
                    self._finish(fut, problem, sample, notify)
                self.stopped = self.stopped or self.budget.spent(self.store.outcomes(), time.monotonic() - start)
        self.elapsed_s = time.monotonic() - start

    def _finish(self, fut: Future, problem: ProblemRef, sample: int,
                notify: Callable[[SampleOutcome | None, str | None], None]) -> None:
        try:
            result = fut.result()
        except Exception as err:  # noqa: BLE001 - one broken job never stops the batch
            tokens, cost = spent_in(job_dir_of(self.run_dir, problem, sample))
            why = error_line(err)
            outcome = SampleOutcome(problem=problem.key, sample=sample, status="error", tokens=tokens,
                                    cost_usd=cost, error=why)
            self.store.finish_sample(outcome)
            trace = "".join(traceback.format_exception(err))
            with (self.run_dir / "errors.log").open("a") as log:
                log.write(f"{problem.key} sample {sample}: {why}\n{trace}\n")
            notify(outcome, f"{problem.key}: {why} (traceback in {self.run_dir / 'errors.log'})")
            return
        self._record(result)
        self.done_now += 1
        notify(result.outcome, None)
