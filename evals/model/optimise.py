"""Optimise the extracted problems with kiln's agent loop (the batch machinery: jobs in flight, checks
through one slot per GPU, a resumable store), each problem's budgets its share of the model's time,
then confirm each best kernel with one more check in the model's own dtype: only a kernel that is
correct and faster than eager with confidence (the CI's low end) is patched.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from kiln.evals.batch import Batch
from kiln.evals.jobs import BatchConfig, JobResult, run_job
from kiln.evals.model.records import OpGroup, OpOutcome
from kiln.evals.problems import ProblemRef
from kiln.tools.evaluator import Evaluator
from kiln.tools.records import CheckOptions, CheckRecord

SHORT_DTYPE = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


class OptimiseOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    llm: str | None = None
    coder_llm: str | None = None
    judge_llm: str | None = None
    proposer_llm: str | None = None
    base_url: str | None = None
    lang: str = "triton"
    strategy: str = "linear"
    device: str = "cpu"
    dtype: str = "fp32"
    max_iters: int = 8
    budget_usd: float | None = Field(None, description="for the whole model; each op gets its share")
    budget_tokens: int | None = None
    budget_minutes: float | None = None
    trials: int = 3
    check_timeout_s: float = 300.0
    concurrency: int = 4
    cpu_slots: int | None = None
    patch: str = Field("faster", description="faster: patch only kernels faster with confidence; correct: any "
                                             "correct kernel (CPU runs, where speed is not measured)")


def batch_config(o: OptimiseOptions) -> BatchConfig:
    return BatchConfig(mode="agent", llm=o.llm, coder_llm=o.coder_llm, judge_llm=o.judge_llm,
                       proposer_llm=o.proposer_llm, base_url=o.base_url, lang=o.lang, device=o.device,
                       dtype=o.dtype, max_iters=o.max_iters, strategy=o.strategy,
                       budget_usd=o.budget_usd, budget_tokens=o.budget_tokens, budget_minutes=o.budget_minutes,
                       check_timeout_s=o.check_timeout_s, trials=o.trials)


def _split(total: float | int | None, share: float, integer: bool = False) -> float | int | None:
    if total is None:
        return None
    part = total * share
    return max(1, int(part)) if integer else part


def shared_job(shares: dict[str, float]) -> Callable[..., JobResult]:
    """run_job with each problem's budgets cut to its share of the selected ops' time."""
    def job(problem: ProblemRef, sample: int, cfg: BatchConfig, evaluator: Evaluator, run_dir: Path) -> JobResult:
        s = shares.get(problem.key, 1.0)
        b = cfg.loop.budgets
        budgets = b.model_copy(update={"usd": _split(b.usd, s), "tokens": _split(b.tokens, s, integer=True),
                                       "minutes": _split(b.minutes, s)})
        mine = cfg.model_copy(update={"loop": cfg.loop.model_copy(update={"budgets": budgets})})
        return run_job(problem, sample, mine, evaluator, run_dir)
    return job


def evaluator_for(o: OptimiseOptions) -> Evaluator:
    from kiln.evals.executors import SlottedEvaluator, visible_gpus
    from kiln.tools.check import LocalEvaluator

    return SlottedEvaluator(LocalEvaluator(), visible_gpus() if o.device == "cuda" else [], o.cpu_slots)


def run_batch(folder: Path, problems: dict[str, Path], groups: dict[str, OpGroup], o: OptimiseOptions,
              evaluator: Evaluator, say: Callable[[str], None]) -> None:
    refs = [ProblemRef(key=k, path=str(p.resolve())) for k, p in problems.items()]
    total = sum(groups[k].share for k in problems) or 1.0
    shares = {k: groups[k].share / total for k in problems}
    batch = Batch(folder, refs, batch_config(o), evaluator, concurrency=o.concurrency, job_fn=shared_job(shares))

    def progress(outcome, error) -> None:  # noqa: ANN001 - SampleOutcome | None, str | None
        if outcome is not None:
            say(f"  optimised {outcome.problem}: {outcome.status}")
        if error:
            say(f"  job failed: {error}")

    batch.run(progress)


def best_kernel(folder: Path, key: str) -> tuple[Path | None, str]:
    """The best correct kernel of one problem's run, or why there is none."""
    summary = folder / "problems" / key / "sample0" / "run" / "summary.json"
    if not summary.exists():
        return None, "no run (the batch stopped before it)"
    data = json.loads(summary.read_text())
    best = data.get("best") or {}
    if best.get("path") and best.get("correct"):
        return Path(best["path"]), ""
    return None, data.get("stop_reason") or data.get("status") or "no correct kernel"


def confirm(problem: Path, kernel: Path, o: OptimiseOptions, evaluator: Evaluator, out: Path) -> CheckRecord:
    """One more check of the best kernel in the model's dtype (cached in `out`)."""
    if out.exists():
        return CheckRecord.model_validate_json(out.read_text())
    opts = CheckOptions(device=o.device, dtype=o.dtype, trials=o.trials, timeout_s=o.check_timeout_s)
    rec = evaluator.check(problem, kernel, opts)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(rec.model_dump_json(indent=2))
    return rec


def decide(g: OpGroup, problem: Path, kernel: Path | None, why: str, rec: CheckRecord | None, patch: str
           ) -> OpOutcome:
    """Patched only when correct and faster than eager with confidence (or, with patch='correct' on a
    run where speed was not measured, correct)."""
    out = OpOutcome(group=g.id, op=g.sig.op + (f" -> {g.tail.op}" if g.tail else ""), share=g.share,
                    problem=str(problem), kernel=str(kernel) if kernel else None)
    if kernel is None or rec is None:
        out.status = "unsupported" if "unsupported" in why else "incorrect"
        out.reason = why
        return out
    sp = rec.timing.speedups if rec.timing and rec.timing.measured else {}
    out.speedup, out.speedup_compile = sp.get("eager"), sp.get("compile")
    if not rec.correct or rec.status != "ok":
        out.status, out.reason = "incorrect", f"confirmation check: {rec.status}: {'; '.join(rec.reasons[:2])}"
    elif out.speedup is not None and out.speedup.verdict == "faster":
        out.status, out.reason = "patched", f"{out.speedup.value:.2f}x vs eager (CI {out.speedup.ci_low:.2f}-" \
                                            f"{out.speedup.ci_high:.2f})"
    elif out.speedup is None and patch == "correct":
        out.status, out.reason = "patched", "correct; speed not measured (patched on request: --patch correct)"
    elif out.speedup is None:
        out.status, out.reason = "not_faster", "speed not measured (no GPU); use --patch correct to patch anyway"
    else:
        out.status, out.reason = "not_faster", f"not faster with confidence: {out.speedup.value:.2f}x " \
                                               f"(CI {out.speedup.ci_low:.2f}-{out.speedup.ci_high:.2f})"
    return out
