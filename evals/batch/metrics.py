"""Batch metrics as pure functions over per-problem outcomes.

Definitions (KernelBench's, made explicit):
- fast_p = (problems that are correct AND faster than p) / ALL problems attempted, per baseline;
- the geometric-mean speedup is over correct problems with a measured speedup only;
- pass@k is the unbiased estimator 1 - C(n-c, k) / C(n, k) averaged over problems.
A figure that was not measured (no GPU) is None, never 0.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from kiln.tools.records import JSON_SAFE

BASELINES = ("eager", "eager_tf32", "compile")
FAST_P = (0.0, 1.0, 1.5, 2.0)


class SampleOutcome(BaseModel):
    """One sample (one generation or one agent run) of one problem, reduced to what metrics need."""

    model_config = JSON_SAFE

    problem: str
    sample: int = 0
    status: str
    compiled: bool = False
    correct: bool = False
    rejected_rules: list[str] = Field(default_factory=list)
    degenerate: bool = False
    speedups: dict[str, float] = Field(default_factory=dict, description="baseline -> speedup")
    confident_faster: dict[str, bool] = Field(default_factory=dict, description="CI low end > 1")
    tokens: int = 0
    cost_usd: float | None = None
    wall_s: float = 0.0
    gpu_s: float = 0.0
    error: str | None = Field(None, description="why the sample failed, when it raised (status 'error')")
    reason: str | None = Field(None, description="why a sample ended with no checked kernel (unsupported, no_code, "
                                                 "llm_error, ...): the run's stop reason, or the Coder's error")

    def why(self) -> str:
        """The sample's own explanation, when it has no check record to give one: '' when none."""
        return self.error or self.reason or ""


class ProblemOutcome(BaseModel):
    """All samples of one problem, and the best of them."""

    model_config = JSON_SAFE

    problem: str
    samples: list[SampleOutcome]

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def n_correct(self) -> int:
        return sum(s.correct for s in self.samples)

    def best_speedup(self, baseline: str) -> float | None:
        values = [s.speedups[baseline] for s in self.samples if s.correct and baseline in s.speedups]
        return max(values) if values else None


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one problem: n samples, c correct (Chen et al., 2021)."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod((n - c - i) / (n - i) for i in range(k))


def mean_pass_at_k(problems: Sequence[ProblemOutcome], k: int) -> float | None:
    eligible = [p for p in problems if p.n >= k]
    if not eligible:
        return None
    return sum(pass_at_k(p.n, p.n_correct, k) for p in eligible) / len(eligible)


def rate(flags: Iterable[bool]) -> float | None:
    values = list(flags)
    return sum(values) / len(values) if values else None


def geomean(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v is not None and v > 0]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def fast_p(problems: Sequence[ProblemOutcome], baseline: str, p: float) -> float:
    """Share of ALL problems with a correct sample faster than p against `baseline`.

    A correct sample whose speed was not measured against this baseline does not count as fast.
    """
    if not problems:
        return 0.0
    best = [prob.best_speedup(baseline) for prob in problems]
    return sum(1 for b in best if b is not None and b > p) / len(problems)


def rejection_rates(samples: Sequence[SampleOutcome]) -> dict[str, float]:
    """Share of samples rejected by each integrity rule."""
    if not samples:
        return {}
    counts = Counter(rule for s in samples for rule in set(s.rejected_rules))
    return {rule: n / len(samples) for rule, n in sorted(counts.items())}


def status_counts(samples: Sequence[SampleOutcome]) -> dict[str, int]:
    return dict(sorted(Counter(s.status for s in samples).items()))


def _sum_optional(values: Iterable[float | None]) -> float | None:
    vals = list(values)
    known = [v for v in vals if v is not None]
    return sum(known) if known else None


def cost_metrics(problems: Sequence[ProblemOutcome]) -> dict[str, float | int | None]:
    samples = [s for p in problems for s in p.samples]
    solved = sum(1 for p in problems if p.n_correct > 0)
    tokens = sum(s.tokens for s in samples)
    cost = _sum_optional(s.cost_usd for s in samples)
    n = len(problems) or 1
    return {
        "tokens": tokens,
        "cost_usd": cost,
        "tokens_per_problem": tokens / n,
        "cost_per_problem_usd": None if cost is None else cost / n,
        "cost_per_solved_usd": None if cost is None or not solved else cost / solved,
        "tokens_per_solved": None if not solved else tokens / solved,
        "wall_s": sum(s.wall_s for s in samples),
        "gpu_hours": sum(s.gpu_s for s in samples) / 3600.0,
    }


def summarize(problems: Sequence[ProblemOutcome], ks: Sequence[int] = (1,), *, timed: bool = True) -> dict:
    """The `metrics.json` body. `timed=False` (no GPU): every speed figure is None, not 0."""
    samples = [s for p in problems for s in p.samples]
    geo: dict[str, Any] = {b: geomean(v for p in problems if (v := p.best_speedup(b)) is not None) for b in BASELINES}
    confident: dict[str, Any] = {
        b: sum(1 for p in problems if any(s.correct and s.confident_faster.get(b) for s in p.samples))
        for b in BASELINES
    }
    fast: dict[str, dict[str, Any]] = {b: {str(p): fast_p(problems, b, p) for p in FAST_P} for b in BASELINES}
    if not timed:
        geo = dict.fromkeys(BASELINES)
        confident = dict.fromkeys(BASELINES)
        fast = {b: dict.fromkeys(map(str, FAST_P)) for b in BASELINES}
    return {
        "n_problems": len(problems),
        "n_samples": len(samples),
        "compile_rate": rate(s.compiled for s in samples),
        "correct_rate": rate(p.n_correct > 0 for p in problems),
        "sample_correct_rate": rate(s.correct for s in samples),
        "pass_at_k": {str(k): mean_pass_at_k(problems, k) for k in ks},
        "timed": timed,
        "fast_p": fast,
        "geomean_speedup": geo,
        "confident_faster": confident,
        "rejection_rate": rejection_rates(samples),
        "degenerate_problems": sum(1 for p in problems if any(s.degenerate for s in p.samples)),
        "status_counts": status_counts(samples),
        "cost": cost_metrics(problems),
    }
