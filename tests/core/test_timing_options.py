"""A check's timing precision is the caller's (CheckOptions.timing_laps_s, timing_target_pct): a
function's laps stop at the CI target or the time cap, never before MIN_LAPS; kiln.rewards takes a
coarser default (REWARD_TIMING) than a full check."""

from __future__ import annotations

from pathlib import Path

from kiln.rewards import KilnReward
from kiln.rewards.callable import REWARD_TIMING
from kiln.tools.check import LocalEvaluator, check
from kiln.tools.check.timing import MIN_LAPS
from kiln.tools.records import CheckOptions

DATA = Path(__file__).parent / "data"
TIMED = CheckOptions(device="cpu", trials=1, timeout_s=120, timing_timeout_s=60.0, time_on_cpu=True,
                     baselines=["eager"])


def test_laps_stop_at_the_callers_ci_target_however_long_the_cap() -> None:
    loose = check(DATA / "add_problem.py", DATA / "add_triton.py",
                  TIMED.model_copy(update={"timing_target_pct": 1000.0, "timing_laps_s": 30.0}))
    assert loose.status == "ok" and loose.timing and loose.timing.measured, loose.reasons
    assert loose.integrity.timing.n_laps == MIN_LAPS  # the CI is within 1000 % at once: the minimum
    assert loose.timing.baselines["eager"].n_samples == MIN_LAPS


def test_a_reward_times_coarser_than_a_full_check_unless_told() -> None:
    assert CheckOptions().timing_laps_s == 1.5 and CheckOptions().timing_target_pct == 1.0
    reward = KilnReward(evaluator=LocalEvaluator(CheckOptions(device="cpu")), device="cpu")
    assert (reward.options.timing_laps_s, reward.options.timing_target_pct) == \
        (REWARD_TIMING["timing_laps_s"], REWARD_TIMING["timing_target_pct"]) == (0.4, 3.0)
    mine = KilnReward(evaluator=LocalEvaluator(CheckOptions(device="cpu")), device="cpu",
                      options=CheckOptions(timing_laps_s=2.0))
    assert mine.options.timing_laps_s == 2.0 and mine.options.timing_target_pct == 1.0
