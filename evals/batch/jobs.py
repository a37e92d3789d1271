"""One unit of batch work: a (problem, sample), in agent or one-shot mode, and what it produced.

`run_job` is a plain function of serialisable arguments so the same code runs in a thread or
anywhere else. LLM calls happen here; every check goes through the evaluator it is given.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from kiln.evals.batch.metrics import SampleOutcome
from kiln.evals.batch.problems import ProblemRef
from kiln.graphs.context import LoopOptions, fold_into_loop
from kiln.graphs.rundir import RunDir
from kiln.tools.evaluator import Evaluator
from kiln.tools.records import JSON_SAFE, CheckOptions, CheckRecord


class BatchConfig(BaseModel):
    """Everything a batch was asked to do; stored in the run so a rerun can check it matches.
    `loop` is the same model `kiln run` builds: each agent-mode sample runs with exactly these options."""

    model_config = JSON_SAFE

    mode: Literal["agent", "oneshot"] = "agent"
    samples: int = Field(1, ge=1)
    loop: LoopOptions = Field(default_factory=LoopOptions)

    @model_validator(mode="before")
    @classmethod
    def _fold(cls, data: Any) -> Any:
        """Flat keywords (`BatchConfig(llm=..., trials=1)`) go into `loop`."""
        return fold_into_loop(data, ("mode", "samples"))


class CandidateRow(BaseModel):
    model_config = JSON_SAFE

    candidate: int
    record: CheckRecord
    source_path: str | None = None


class JobResult(BaseModel):
    model_config = JSON_SAFE

    outcome: SampleOutcome
    candidates: list[CandidateRow] = Field(default_factory=list)
    best_path: str | None = None


def outcome_from_record(problem: str, sample: int, rec: CheckRecord | None, *, tokens: int = 0,
                        cost_usd: float | None = None, wall_s: float = 0.0,
                        status: str | None = None, reason: str | None = None) -> SampleOutcome:
    """Reduce a sample's best check record to what the metrics need (`reason`: why there is none)."""
    if rec is None:
        return SampleOutcome(problem=problem, sample=sample, status=status or "error", tokens=tokens,
                             cost_usd=cost_usd, wall_s=wall_s, reason=reason)
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
        gpu_s=check_seconds(rec.stages_s) if rec.device.startswith("cuda") else 0.0,
    )


def check_seconds(stages: dict[str, float]) -> float:
    """A check's own wall seconds: its `total` (the other entries are parts of it, some nested:
    `timing.*` within `timing`, every stage within `total_workers`); the top-level stages summed
    for a record that has no total."""
    if "total" in stages:
        return stages["total"]
    return sum(v for k, v in stages.items() if "." not in k and k != "total_workers")


@functools.cache
def gpu_facts(device: str):  # noqa: ANN201 - GpuFacts lives in kiln.agents (imported lazily)
    """Read once per batch: the probe runs a subprocess."""
    from kiln.agents.gpufacts import read_gpu_facts

    return read_gpu_facts(device)


def check_options(cfg: BatchConfig) -> CheckOptions:
    """What a one-shot sample is checked with: the batch's check options, as `kiln run` uses them."""
    return cfg.loop.check


def job_dir_of(run_dir: Path, problem: ProblemRef, sample: int) -> Path:
    return run_dir / "problems" / problem.key.replace("/", "__") / f"sample{sample}"


def run_of(job_dir: Path) -> RunDir:
    """The `kiln run` directory of an agent-mode job."""
    return RunDir(job_dir / "run")


def why_no_kernel(run_dir: Path, outcome: SampleOutcome) -> str:
    """Why a sample has no check record, for every batch output: the outcome's own words, else (a batch
    stored before outcomes kept them) its run's summary.json stop reason or its one-shot error.txt."""
    if outcome.why():
        return outcome.why()
    job = run_dir / "problems" / outcome.problem.replace("/", "__") / f"sample{outcome.sample}"
    with contextlib.suppress(OSError, ValueError, AttributeError):
        return str(json.loads(run_of(job).summary.read_text()).get("stop_reason") or "")
    with contextlib.suppress(OSError):
        return (job / "error.txt").read_text().strip()
    return ""


def spent_in(job_dir: Path) -> tuple[int, float | None]:
    """(tokens, USD) the sample's LLM calls cost so far, read from what it wrote: a sample that fails
    after paying for calls is stored with what it paid, not with 0."""
    usages = []
    for path in [*run_of(job_dir).llm_calls(), job_dir / "usage.json"]:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            data = json.loads(path.read_text())
            usages.append(data["reply"]["usage"] if "reply" in data else data)
    tokens = sum(int(u.get("input_tokens", 0)) + int(u.get("output_tokens", 0)) for u in usages)
    costs = [u["cost_usd"] for u in usages if u.get("cost_usd") is not None]
    return tokens, (sum(costs) if costs else None)


def run_job(problem: ProblemRef, sample: int, cfg: BatchConfig, evaluator: Evaluator, run_dir: Path) -> JobResult:
    job_dir = job_dir_of(run_dir, problem, sample)
    job_dir.mkdir(parents=True, exist_ok=True)
    if cfg.mode == "oneshot":
        return _oneshot(problem, sample, cfg, evaluator, job_dir)
    return _agent(problem, sample, cfg, evaluator, job_dir)


def _oneshot(problem: ProblemRef, sample: int, cfg: BatchConfig, evaluator: Evaluator, job_dir: Path) -> JobResult:
    """One generation, one check: the standard way to score a model (pass@k)."""
    from kiln.agents.base import CoderTask
    from kiln.agents.registry import resolve_roles

    start = time.monotonic()
    loop = cfg.loop
    roles = resolve_roles(loop.roles.llm, **loop.roles.kwargs(), lang=loop.lang, cache_path=None,
                          budgets=loop.budgets, device=loop.device)
    src = Path(problem.path).read_text()
    task = CoderTask(mode="generate", lang=loop.lang, problem_name=problem.key, problem_src=src,
                     gpu=gpu_facts(loop.device), iteration=sample, dtype=loop.check.dtype)
    reply = roles.coder.write(task)
    (job_dir / "reply.md").write_text(reply.raw or "")
    (job_dir / "usage.json").write_text(reply.usage.model_dump_json())
    tokens = reply.usage.input_tokens + reply.usage.output_tokens
    if not reply.ok or not reply.source:
        (job_dir / "error.txt").write_text(reply.error or "no code")
        status = "unsupported" if reply.failure == "unsupported" else "no_code"
        return JobResult(outcome=outcome_from_record(problem.key, sample, None, tokens=tokens,
                                                     cost_usd=reply.usage.cost_usd, status=status,
                                                     wall_s=time.monotonic() - start, reason=reply.error or "no code"))
    cand = job_dir / "candidate.py"
    cand.write_text(reply.source)
    record = evaluator.check(Path(problem.path), cand, check_options(cfg))
    (job_dir / "check.json").write_text(record.model_dump_json(indent=2))
    outcome = outcome_from_record(problem.key, sample, record, tokens=tokens, cost_usd=reply.usage.cost_usd,
                                  wall_s=time.monotonic() - start)
    return JobResult(outcome=outcome, candidates=[CandidateRow(candidate=0, record=record, source_path=str(cand))],
                     best_path=str(cand) if record.correct else None)


def _candidate_rows(run: RunDir, ids: list[str]) -> list[CandidateRow]:
    """Each candidate's final check record (re-checks against new stress cases are check_1.json, ...)."""
    rows = []
    for i, cid in enumerate(ids):
        check = run.last_check(cid)
        if check is None:
            continue
        kernel = run.kernel(cid)
        rows.append(CandidateRow(candidate=i, record=CheckRecord.model_validate_json(check.read_text()),
                                 source_path=str(kernel) if kernel.exists() else None))
    return rows


def _agent(problem: ProblemRef, sample: int, cfg: BatchConfig, evaluator: Evaluator, job_dir: Path) -> JobResult:
    """The full `kiln run` graph on one problem, with its budgets; an interrupted run is resumed."""
    from kiln.graphs import resume_run, run_problem

    start = time.monotonic()
    run = run_of(job_dir)
    if run.options.exists():
        summary = resume_run(run.root, evaluator=evaluator)
    else:
        summary = run_problem(Path(problem.path), out=run.root, evaluator=evaluator, loop=cfg.loop)
    best_check = summary.best.check_path
    best = CheckRecord.model_validate_json(Path(best_check).read_text()) if best_check else None
    status = None if best else summary.status
    outcome = outcome_from_record(problem.key, sample, best, tokens=summary.tokens, cost_usd=summary.cost_usd,
                                  wall_s=time.monotonic() - start, status=status, reason=summary.stop_reason)
    return JobResult(outcome=outcome, candidates=_candidate_rows(run, summary.candidate_ids or run.candidate_ids()),
                     best_path=summary.best.path if summary.best.correct else None)
