"""On the H200: one round with the built-in policies, timed checks, speed in the reward."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kiln.evals.curriculum.config import CurriculumConfig
from kiln.evals.curriculum.runner import build, finish

pytestmark = pytest.mark.gpu


def test_one_gpu_round_times_its_samples_and_rewards_speed(tmp_path: Path) -> None:
    cfg = CurriculumConfig(rounds=1, per_round=3, samples=2, families=["elementwise", "reduction", "softmax"],
                           max_ops=2, device="cuda", trials=2)
    cur = build(cfg, tmp_path)
    cur.run()
    counts, _ = finish(cur)
    accepted = [m for m in cur.store.modules() if m.accepted]
    assert len(accepted) == 3 and all(m.verdict.probe.time_ms is not None for m in accepted)
    samples = cur.store.samples()
    timed = [s for s in samples if s.reward and s.reward.verified and s.record.timing and s.record.timing.measured]
    assert timed, [s.record.status for s in samples]
    for s in timed:
        if s.reward.speed_counted:
            assert s.reward.reward == pytest.approx(max(1.0, 2 + math.log(min(s.reward.speedup, 10.0))))
    assert counts["grpo"] == 3
