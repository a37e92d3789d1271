"""One unit of batch work: a (problem, sample), in agent or one-shot mode, and what it produced.

`run_job` is a plain function of serialisable arguments so the same code runs in a thread or
anywhere else. LLM calls happen here; every check goes through the evaluator it is given.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kiln.evals.metrics import SampleOutcome
from kiln.evals.problems import ProblemRef
from kiln.tools.evaluator import Evaluator
from kiln.tools.records import CheckOptions, CheckRecord


class BatchConfig(BaseModel):
    """Everything a batch was asked to do; stored in the run so a rerun can check it matches."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["agent", "oneshot"] = "agent"
    samples: int = Field(1, ge=1)
    llm: str | None = None
    coder_llm: str | None = None
    judge_llm: str | None = None
    proposer_llm: str | None = None
    base_url: str | None = None
    lang: Literal["triton", "cuda"] = "triton"
    device: Literal["auto", "cuda", "cpu"] = "auto"
    dtype: Literal["fp32", "bf16", "fp16"] = "fp32"
    max_iters: int = 8
    target_speedup: float = 1.0
    strategy: Literal["linear", "beam", "mcts"] = "linear"
    budget_usd: float | None = None
    budget_tokens: int | None = None
    budget_minutes: float | None = None
    check_timeout_s: float = 300.0
    trials: int = 5
    isolation: Literal["strict", "best-effort"] = "best-effort"
    bwrap: str | None = None


class CandidateRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    candidate: int
    record: CheckRecord
    source_path: str | None = None


class JobResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    outcome: SampleOutcome
    candidates: list[CandidateRow] = Field(default_factory=list)
    best_path: str | None = None


def outcome_from_record(problem: str, sample: int, rec: CheckRecord | None, *, tokens: int = 0,
                        cost_usd: float | None = None, wall_s: float = 0.0,
                        status: str | None = None) -> SampleOutcome:
    """Reduce a sample's best check record to what the metrics need."""
    if rec is None:
        return SampleOutcome(problem=problem, sample=sample, status=status or "error", tokens=tokens,
                             cost_usd=cost_usd, wall_s=wall_s)
    integ = rec.integrity
    timing = rec.timing if rec.timing and rec.timing.measured else None
    return SampleOutcome(
        problem=problem,
        sample=sample,
        status=status or rec.status,
        compiled=bool(rec.compile and rec.compile.ok),
        correct=rec.correct,
        rejected_rules=[f.rule for f in integ.findings if f.severity == "reject"]
        if integ and rec.status == "rejected" else [],
        degenerate=bool(integ and integ.degenerate and integ.degenerate.degenerate),
        speedups={b: sp.value for b, sp in timing.speedups.items()} if timing else {},
        confident_faster={b: sp.verdict == "faster" for b, sp in timing.speedups.items()} if timing else {},
        tokens=tokens,
        cost_usd=cost_usd,
        wall_s=wall_s,
        gpu_s=sum(rec.stages_s.values()) if rec.device.startswith("cuda") else 0.0,
    )


@functools.cache
def gpu_facts(device: str):  # noqa: ANN201 - GpuFacts lives in kiln.agents (imported lazily)
    """Read once per batch: the probe runs a subprocess."""
    from kiln.agents.gpufacts import read_gpu_facts

    return read_gpu_facts(device)


def check_options(cfg: BatchConfig) -> CheckOptions:
    return CheckOptions(device=cfg.device, dtype=cfg.dtype, trials=cfg.trials, timeout_s=cfg.check_timeout_s,
                        isolation=cfg.isolation, bwrap=cfg.bwrap)


def run_job(problem: ProblemRef, sample: int, cfg: BatchConfig, evaluator: Evaluator, run_dir: Path) -> JobResult:
    job_dir = run_dir / "problems" / problem.key.replace("/", "__") / f"sample{sample}"
    job_dir.mkdir(parents=True, exist_ok=True)
    if cfg.mode == "oneshot":
        return _oneshot(problem, sample, cfg, evaluator, job_dir)
    return _agent(problem, sample, cfg, evaluator, job_dir)


def _oneshot(problem: ProblemRef, sample: int, cfg: BatchConfig, evaluator: Evaluator, job_dir: Path) -> JobResult:
    """One generation, one check: the standard way to score a model (pass@k)."""
    from kiln.agents.base import CoderTask
    from kiln.agents.registry import resolve_roles

    start = time.monotonic()
    roles = resolve_roles(cfg.llm, coder=cfg.coder_llm, judge=cfg.judge_llm, proposer=cfg.proposer_llm,
                          base_url=cfg.base_url, lang=cfg.lang, cache_path=None, budgets=_budgets(cfg),
                          device=cfg.device)
    src = Path(problem.path).read_text()
    task = CoderTask(mode="generate", lang=cfg.lang, problem_name=problem.key, problem_src=src,
                     gpu=gpu_facts(cfg.device), iteration=sample)
    reply = roles.coder.write(task)
    (job_dir / "reply.md").write_text(reply.raw or "")
    tokens = reply.usage.input_tokens + reply.usage.output_tokens
    if not reply.ok or not reply.source:
        (job_dir / "error.txt").write_text(reply.error or "no code")
        status = "unsupported" if reply.error and "unsupported" in reply.error else "no_code"
        return JobResult(outcome=outcome_from_record(problem.key, sample, None, tokens=tokens,
                                                     cost_usd=reply.usage.cost_usd, status=status,
                                                     wall_s=time.monotonic() - start))
    cand = job_dir / "candidate.py"
    cand.write_text(reply.source)
    record = evaluator.check(Path(problem.path), cand, check_options(cfg))
    (job_dir / "check.json").write_text(record.model_dump_json(indent=2))
    outcome = outcome_from_record(problem.key, sample, record, tokens=tokens, cost_usd=reply.usage.cost_usd,
                                  wall_s=time.monotonic() - start)
    return JobResult(outcome=outcome, candidates=[CandidateRow(candidate=0, record=record, source_path=str(cand))],
                     best_path=str(cand) if record.correct else None)


def _budgets(cfg: BatchConfig):  # noqa: ANN202 - type lives in kiln.agents (imported lazily)
    from kiln.agents.llm.usage import Budgets

    return Budgets(usd=cfg.budget_usd, tokens=cfg.budget_tokens, minutes=cfg.budget_minutes)


def _last_check(folder: Path) -> Path | None:
    """A candidate's final check record (re-checks against new stress cases are check_1.json, ...)."""
    checks = sorted(folder.glob("check*.json"), key=lambda p: (len(p.name), p.name))
    return checks[-1] if checks else None


def _candidate_rows(run: Path) -> list[CandidateRow]:
    rows = []
    for i, folder in enumerate(sorted((run / "candidates").glob("*"))):
        check = _last_check(folder)
        if check is None:
            continue
        kernel = folder / "kernel.py"
        rows.append(CandidateRow(candidate=i, record=CheckRecord.model_validate_json(check.read_text()),
                                 source_path=str(kernel) if kernel.exists() else None))
    return rows


def _agent(problem: ProblemRef, sample: int, cfg: BatchConfig, evaluator: Evaluator, job_dir: Path) -> JobResult:
    """The full `kiln run` graph on one problem, with its budgets; an interrupted run is resumed."""
    from kiln.graphs import resume_run, run_problem

    start = time.monotonic()
    run = job_dir / "run"
    if (run / "run.json").exists():
        summary = resume_run(run, evaluator=evaluator)
    else:
        summary = run_problem(Path(problem.path), out=run, evaluator=evaluator, lang=cfg.lang, device=cfg.device,
                              llm=cfg.llm, coder_llm=cfg.coder_llm, judge_llm=cfg.judge_llm,
                              proposer_llm=cfg.proposer_llm, base_url=cfg.base_url,
                              target_speedup=cfg.target_speedup, strategy=cfg.strategy, trials=cfg.trials,
                              check_timeout_s=cfg.check_timeout_s, max_iters=cfg.max_iters, dtype=cfg.dtype,
                              budget_usd=cfg.budget_usd, budget_tokens=cfg.budget_tokens,
                              budget_minutes=cfg.budget_minutes)
    best_check = summary.best.check_path
    best = CheckRecord.model_validate_json(Path(best_check).read_text()) if best_check else None
    status = None if best else ("unsupported" if "unsupported" in (summary.stop_reason or "") else summary.status)
    outcome = outcome_from_record(problem.key, sample, best, tokens=summary.tokens, cost_usd=summary.cost_usd,
                                  wall_s=time.monotonic() - start, status=status)
    return JobResult(outcome=outcome, candidates=_candidate_rows(run),
                     best_path=summary.best.path if summary.best.correct else None)
