"""The CA-GRPO reward and advantages on constructed groups, against the documented formula."""

from __future__ import annotations

import math

import pytest
import torch

from kiln.evals.curriculum.rewards import RewardParams, advantages, group_rewards, sample_reward, verified
from kiln.graphs.reward import reward_of
from kiln.tools.records import CaseSummary, CheckRecord, CorrectnessRecord, Speedup, TimingRecord


def rec(status: str = "ok", *, speedup: float | None = None, passed: int = 8, trials: int = 8,
        stress_failed: bool = False) -> CheckRecord:
    correctness = CorrectnessRecord(passed=passed == trials, atol=1e-4, rtol=1e-4, n_trials=trials, n_passed=passed,
                                    score=passed / trials,
                                    cases={"stress": CaseSummary(n_trials=2, n_passed=1 if stress_failed else 2)})
    timing = TimingRecord(measured=speedup is not None, speedups={} if speedup is None else {
        "eager": Speedup(baseline="eager", value=speedup, ci_low=speedup, ci_high=speedup, verdict="faster")})
    return CheckRecord(problem="p.py", candidate="c.py", status=status, correct=status == "ok",
                       correctness=correctness, timing=timing)


def test_only_verified_samples_earn_anything() -> None:
    p = RewardParams()
    assert sample_reward(rec(), p).reward == 1.0
    for bad in (rec("incorrect", passed=6), rec("rejected"), rec("compile_error", passed=0), rec("timeout"),
                rec("crashed"), rec(stress_failed=True), None):
        assert sample_reward(bad, p).reward == 0.0
    # the graph's selection reward gives partial credit that a trainer must not: 6/8 trials passed
    assert reward_of(rec("incorrect", passed=6)).reward == pytest.approx(0.75)
    assert not verified(rec(stress_failed=True))


def test_speed_counts_like_the_graph_reward_once_the_group_is_reliably_correct() -> None:
    group = [rec(speedup=1.0), rec(speedup=3.0), rec(speedup=40.0), rec("incorrect", passed=4)]
    out = group_rewards(group)
    assert [s.reward for s in out[:2]] == pytest.approx([reward_of(group[0]).reward, reward_of(group[1]).reward])
    assert out[1].reward == pytest.approx(2 + math.log(3.0))
    assert out[2].reward == pytest.approx(2 + math.log(10.0))  # clipped at max_speedup
    assert out[3].reward == 0.0 and all(s.speed_counted for s in out[:3])
    slow = group_rewards([rec(speedup=0.2), rec(speedup=0.2)])
    assert [s.reward for s in slow] == [1.0, 1.0]  # floored: correct always beats failing


def test_below_the_speed_gate_a_group_is_scored_on_correctness_alone() -> None:
    group = [rec(speedup=5.0), rec("incorrect", passed=2), rec("rejected"), rec("compile_error", passed=0)]
    out = group_rewards(group, RewardParams(speed_gate=0.5))
    assert [s.reward for s in out] == [1.0, 0.0, 0.0, 0.0] and not out[0].speed_counted
    assert group_rewards(group, RewardParams(speed_gate=0.25))[0].reward == pytest.approx(2 + math.log(5.0))


def test_advantages_are_group_relative_and_match_trl() -> None:
    rewards = [0.0, 1.0, 2.5, 0.0]
    mean = sum(rewards) / 4
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / 3)
    expect = [(r - mean) / (std + 1e-4) for r in rewards]
    assert advantages(rewards) == pytest.approx(expect)
    t = torch.tensor(rewards)
    assert advantages(rewards) == pytest.approx(((t - t.mean()) / (t.std() + 1e-4)).tolist(), rel=1e-6)
    assert advantages([1.0, 1.0, 1.0]) == [0.0, 0.0, 0.0]
    assert advantages([2.0]) == [0.0]
    out = group_rewards([rec(), rec("rejected")])
    assert out[0].advantage > 0 > out[1].advantage
    assert sum(s.advantage for s in out) == pytest.approx(0.0, abs=1e-9)


def test_records_round_trip_through_json() -> None:
    out = group_rewards([rec(speedup=2.0), rec()])
    assert [type(s).model_validate_json(s.model_dump_json()) for s in out] == out
