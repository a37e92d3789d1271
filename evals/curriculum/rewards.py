"""The CA-GRPO reward: correctness-gated per sample, speed-aware per group, group-relative advantages.

For a group of k samples (completions for one module), with check records c_1..c_k:

    verified_i = c_i is `ok`, correct, every planned correctness group passed (hidden trials and
                 every stress case), none left unattempted
    r_i = 0                                     if not verified_i (compile error, incorrect, crashed,
                                                timeout, rejected by integrity, unsupported, no code)
    r_i = 1                                     if verified_i and (speed not measured, the problem is
                                                degenerate, or the group's verified share < speed_gate)
    r_i = max(1, 2 + ln(min(s_i, max_speedup)))  otherwise (s_i: speedup vs eager)
    A_i = (r_i - mean(r)) / (std(r) + 1e-4)      std with Bessel's correction; A = 0 when k = 1

For a verified sample the reward is the graph's selection reward (`kiln.graphs.reward.reward_of`)
with the speedup clipped at `max_speedup`. The graph gives failing candidates partial credit (the
share of trials passed) to rank repairs within a run; a trainer must not: ReLU-as-identity passes
three of the four hidden distributions, so partial credit would pay a cheat 0.75.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

from kiln.graphs.reward import reward_of
from kiln.tools.records import CheckRecord

EPS = 1e-4


class RewardParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fail_reward: float = Field(0.0, description="any sample that is not verified, cheats included")
    speed_gate: float = Field(0.5, ge=0.0, le=1.0, description="share of verified samples a group needs before "
                                                                "speed counts in it")
    max_speedup: float = Field(10.0, gt=1.0, description="speedups above this earn no more (kiln re-verifies "
                                                          "anything above 10x)")
    eps: float = EPS


class SampleReward(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reward: float
    advantage: float = 0.0
    verified: bool = False
    status: str = "error"
    speedup: float | None = Field(None, description="vs eager, when measured")
    speed_counted: bool = False


def verified(rec: CheckRecord | None) -> bool:
    """Correct across every trial and stress case the check planned: the gate speed waits for."""
    if rec is None or rec.status != "ok" or not rec.correct:
        return False
    c = rec.correctness
    if c is None or not c.passed or c.not_attempted:
        return False
    cases_ok = all(s.n_passed == s.n_trials and not s.timed_out for s in c.cases.values())
    return cases_ok and (c.score is None or c.score >= 1.0)


def _degenerate(rec: CheckRecord) -> bool:
    d = rec.integrity.degenerate if rec.integrity else None
    return bool(d and d.degenerate)


def sample_reward(rec: CheckRecord | None, params: RewardParams, *, speed_allowed: bool = True) -> SampleReward:
    """One sample's reward, before group-relative normalisation."""
    status = rec.status if rec is not None else "error"
    if not verified(rec):
        return SampleReward(reward=params.fail_reward, status=status)
    assert rec is not None
    speedup = rec.speedup_vs_eager
    if speedup is None or speedup <= 0 or not speed_allowed or _degenerate(rec):
        return SampleReward(reward=1.0, verified=True, status=status, speedup=speedup)
    clipped = rec.model_copy(deep=True)
    assert clipped.timing is not None
    sp = clipped.timing.speedups["eager"]
    sp.value = min(sp.value, params.max_speedup)
    return SampleReward(reward=reward_of(clipped).reward, verified=True, status=status, speedup=speedup,
                        speed_counted=True)


def advantages(rewards: list[float], eps: float = EPS) -> list[float]:
    """Group-relative advantages, as TRL's GRPO computes them with scale_rewards='group'."""
    k = len(rewards)
    if k < 2:
        return [0.0] * k
    mean = sum(rewards) / k
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (k - 1))
    return [(r - mean) / (std + eps) for r in rewards]


def group_rewards(records: list[CheckRecord | None], params: RewardParams | None = None) -> list[SampleReward]:
    """Rewards and advantages for one group (one module's k samples)."""
    params = params or RewardParams()
    share = sum(verified(r) for r in records) / len(records) if records else 0.0
    out = [sample_reward(r, params, speed_allowed=share >= params.speed_gate) for r in records]
    for s, a in zip(out, advantages([s.reward for s in out], params.eps), strict=True):
        s.advantage = a
    return out
