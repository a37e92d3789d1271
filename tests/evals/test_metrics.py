"""Batch metrics against values computed by hand."""

from __future__ import annotations

import math

import pytest

from kiln.evals.batch.metrics import ProblemOutcome, SampleOutcome, fast_p, geomean, pass_at_k, summarize


def s(problem: str, sample: int = 0, *, correct: bool = False, eager: float | None = None,
      compile_: float | None = None, status: str | None = None, **kw) -> SampleOutcome:
    speedups = {k: v for k, v in (("eager", eager), ("compile", compile_)) if v is not None}
    return SampleOutcome(problem=problem, sample=sample, status=status or ("ok" if correct else "incorrect"),
                         compiled=status != "compile_error", correct=correct, speedups=speedups, **kw)


def test_pass_at_k_matches_hand_values() -> None:
    # n=5, c=2: pass@1 = 2/5; pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(5, 4, 2) == 1.0  # n - c < k
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


def test_fast_p_divides_by_all_problems_attempted() -> None:
    problems = [
        ProblemOutcome(problem="a", samples=[s("a", correct=True, eager=2.5)]),
        ProblemOutcome(problem="b", samples=[s("b", correct=True, eager=1.2)]),
        ProblemOutcome(problem="c", samples=[s("c", correct=False, eager=9.0)]),  # fast but wrong: never counts
        ProblemOutcome(problem="d", samples=[s("d", status="compile_error")]),
    ]
    assert fast_p(problems, "eager", 0.0) == 0.5
    assert fast_p(problems, "eager", 1.0) == 0.5
    assert fast_p(problems, "eager", 1.5) == 0.25
    assert fast_p(problems, "eager", 2.0) == 0.25
    assert fast_p(problems, "compile", 0.0) == 0.0


def test_summarize_hand_computed() -> None:
    problems = [
        ProblemOutcome(problem="a", samples=[s("a", 0, correct=True, eager=2.0, tokens=100, cost_usd=0.5),
                                             s("a", 1, correct=False, tokens=50, cost_usd=0.25)]),
        ProblemOutcome(problem="b", samples=[s("b", 0, correct=True, eager=0.5, tokens=10, cost_usd=0.25),
                                             s("b", 1, status="compile_error", tokens=10, cost_usd=0.0)]),
        ProblemOutcome(problem="c", samples=[s("c", 0, status="rejected", rejected_rules=["static.stream"]),
                                             s("c", 1, correct=False, degenerate=True)]),
    ]
    m = summarize(problems, ks=(1, 2))
    assert m["n_problems"] == 3 and m["n_samples"] == 6
    assert m["correct_rate"] == pytest.approx(2 / 3)
    assert m["compile_rate"] == pytest.approx(5 / 6)
    assert m["pass_at_k"]["1"] == pytest.approx((0.5 + 0.5 + 0.0) / 3)
    assert m["pass_at_k"]["2"] == pytest.approx((1 + 1 + 0) / 3)
    assert m["fast_p"]["eager"]["1.0"] == pytest.approx(1 / 3)
    assert m["fast_p"]["eager"]["0.0"] == pytest.approx(2 / 3)
    assert m["geomean_speedup"]["eager"] == pytest.approx(math.sqrt(2.0 * 0.5))
    assert m["geomean_speedup"]["compile"] is None
    assert m["rejection_rate"] == {"static.stream": pytest.approx(1 / 6)}
    assert m["degenerate_problems"] == 1
    assert m["cost"]["tokens"] == 170
    assert m["cost"]["cost_usd"] == pytest.approx(1.0)
    assert m["cost"]["cost_per_solved_usd"] == pytest.approx(0.5)


def test_untimed_runs_report_null_not_zero() -> None:
    problems = [ProblemOutcome(problem="a", samples=[s("a", correct=True)])]
    m = summarize(problems, timed=False)
    assert m["correct_rate"] == 1.0
    assert m["fast_p"]["eager"]["1.0"] is None
    assert m["geomean_speedup"]["eager"] is None


def test_geomean_ignores_missing() -> None:
    assert geomean([]) is None
    assert geomean([4.0, 1.0]) == pytest.approx(2.0)


def test_a_checks_gpu_seconds_are_its_total_not_the_sum_of_nested_stages() -> None:
    """stages_s holds nested entries (every stage within total_workers and total, timing.* within
    timing): a batch row's gpu_s is the check's own total, not their sum."""
    from kiln.evals.batch.jobs import check_seconds

    stages = {"load": 0.01, "fork_server": 0.6, "compile": 1.5, "correctness": 0.7, "timing": 1.9,
              "timing.candidate_laps": 1.2, "timing.baselines": 0.3, "total_workers": 4.6, "total": 8.2}
    assert check_seconds(stages) == 8.2
    no_total = {k: v for k, v in stages.items() if k != "total"}
    assert abs(check_seconds(no_total) - (0.01 + 0.6 + 1.5 + 0.7 + 1.9)) < 1e-9
