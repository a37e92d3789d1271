"""The correctness-gated reward every strategy ranks candidates by, exported per candidate
(`rewards.jsonl`) for training use.

Speed counts only once every correctness check passes (the gating KernelZero's CA-GRPO uses):

- failing, rejected or not built: the check's correctness score, in [0, 1): the fraction of the
  planned (case, input distribution) groups that passed, with every case attempted, so it does not
  depend on the order of the cases or on where the time ran out (0 for a compile error, a crash, or
  an integrity rejection: a cheat earns nothing). Records without a score fall back to the fraction
  of trials passed;
- correct, speed not measured (CPU): exactly 1;
- correct and timed: 2 + ln(speedup vs eager), floored at 1, so any correct kernel outranks every
  failing one and a 1.0x kernel scores 2.
"""

from __future__ import annotations

import math

from pydantic import BaseModel

from kiln.tools.records import JSON_SAFE, CheckRecord


class Reward(BaseModel):
    model_config = JSON_SAFE

    reward: float
    correct: bool
    frac_passed: float
    log_speedup: float | None = None
    speed_measured: bool = False


def frac_passed(record: CheckRecord) -> float:
    """The order-independent score when the check gives one, else trials passed / compared."""
    c = record.correctness
    if c is None:
        return 0.0
    if c.score is not None:
        return c.score
    return c.n_passed / c.n_trials if c.n_trials else 0.0


def reward_of(record: CheckRecord) -> Reward:
    frac = frac_passed(record)
    if record.status == "rejected":
        return Reward(reward=0.0, correct=False, frac_passed=frac)
    if not (record.correct and record.status == "ok"):
        return Reward(reward=min(frac, 0.999), correct=False, frac_passed=frac)
    speedup = record.speedup_vs_eager
    if speedup is None or speedup <= 0:
        return Reward(reward=1.0, correct=True, frac_passed=frac)
    log_s = math.log(speedup)
    return Reward(reward=max(1.0, 2.0 + log_s), correct=True, frac_passed=frac, log_speedup=log_s,
                  speed_measured=True)
