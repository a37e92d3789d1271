"""`kiln.rewards`: kiln's check as a reward for RL trainers (TRL's GRPO `reward_funcs`, verl).

    from kiln.rewards import KilnReward
    reward = KilnReward(device="auto")            # local GPUs (one check per GPU), or executor="ray"
    trainer = GRPOTrainer(model=..., reward_funcs=[reward], train_dataset=ds, ...)   # ds has a `problem` column

Every completion goes through kiln's real check (sandboxed workers, verdicts computed in kiln's
process), in parallel over the evaluator's slots, each with a timeout; results are cached by
(problem, completion, options, seed), and each check's secret seed is derived from the reward's
seed and the two texts, so a completion gets the same trials, and the same correctness verdict,
every time. The reward is the CA-GRPO formula of `kiln.evals.curriculum.rewards`
(docs/curriculum.md): 0 for anything not verified, cheats included; speed only once a group is
reliably correct.
"""

from __future__ import annotations

from kiln.evals.curriculum.rewards import RewardParams, SampleReward, advantages, group_rewards, sample_reward
from kiln.rewards.callable import KilnReward, completion_code
from kiln.rewards.verl import compute_score, compute_score_batch, configure

__all__ = ["KilnReward", "RewardParams", "SampleReward", "advantages", "completion_code", "compute_score",
           "compute_score_batch", "configure", "group_rewards", "sample_reward"]
