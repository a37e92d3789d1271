"""The timing stage's protocol, exercised on the CPU with host clocks (`time_on_cpu`): the numbers
mean nothing here, the plumbing is what is tested. Baselines in their own worker, statistics in the
parent, a secret subset of timed outputs re-checked against the reference, kiln's clock around
the loop. The GPU suite (`-m gpu`) measures for real."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln.tools.check import check
from kiln.tools.integrity import verdict
from kiln.tools.records import CheckOptions, TimingIntegrity

DATA = Path(__file__).parent / "data"
PROBLEM = DATA / "add_problem.py"
TIMED = CheckOptions(device="cpu", trials=1, timeout_s=120, timing_timeout_s=4.0, time_on_cpu=True,
                     baselines=["eager", "eager_tf32"])


@pytest.fixture(scope="module")
def honest():  # noqa: ANN201
    return check(PROBLEM, DATA / "add_triton.py", TIMED)


def test_an_honest_candidate_is_timed_against_a_baseline_from_another_process(honest) -> None:
    t = honest.timing
    assert t and t.measured and t.candidate and t.candidate.n_samples >= 30, honest.reasons
    assert set(t.baselines) == set(t.speedups) == {"eager", "eager_tf32"} and not t.baseline_errors  # both, in order
    ti = honest.integrity.timing
    assert ti.timed_outputs_checked == 8 and ti.timed_outputs_failed == 0
    assert ti.parent_wall_s >= ti.parent_event_s > 0 and ti.overhead_us is not None
    assert ti.n_calls_loop == t.candidate.n_samples


def test_a_call_counter_that_skips_work_while_timed_is_caught() -> None:
    rec = check(PROBLEM, DATA / "timing" / "counts_calls.py", TIMED)
    assert rec.correctness and rec.correctness.passed  # right whenever it is checked outside timing
    assert rec.status == "rejected" and any("timing.recheck-failed" in r for r in rec.reasons), rec.reasons
    assert rec.integrity.timing.timed_outputs_failed > 0


def _ti(**kw) -> TimingIntegrity:
    base = {"parent_wall_s": 1.0, "parent_event_s": 0.5, "overhead_us": 100.0, "n_calls_loop": 1000,
            "hidden_us_per_call": 0.0}
    return TimingIntegrity(**{**base, **kw})


def test_the_parent_bound_on_the_loop() -> None:
    """A loop shorter than its own events is a rejection; the hidden-time and median bounds are
    warnings until calibrated on the H200 (their harness overhead comes from another process)."""
    rules = lambda ti: [f.rule for f in verdict.judge_timing(ti)]  # noqa: E731
    severity = lambda ti: [f.severity for f in verdict.judge_timing(ti)]  # noqa: E731
    assert severity(_ti(parent_wall_s=0.3)) == ["reject"]
    assert severity(_ti(hidden_us_per_call=400.0)) == ["warn"]
    assert rules(_ti()) == []  # 500 us of events + 100 us overhead per call in a 1 s loop... honest
    assert rules(_ti(parent_wall_s=0.3)) == ["timing.parent-bound"]  # the loop ended before its own events
    assert rules(_ti(hidden_us_per_call=400.0)) == ["timing.parent-bound"]  # 400 us/call nobody accounts for
    assert rules(_ti(hidden_us_per_call=40.0)) == []  # within the slack (20 us + a quarter of the overhead)
    assert rules(_ti(hidden_us_per_call=-90.0)) == ["timing.parent-bound"]  # faster than the harness itself
    # a forgery that keeps the samples' sum but reports a median 5x too small
    assert rules(_ti(median_us=100.0, parent_per_call_us=500.0)) == ["timing.parent-bound"]
    assert rules(_ti(median_us=450.0, parent_per_call_us=500.0)) == []  # honest: median near the mean
