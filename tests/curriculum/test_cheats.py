"""Through kiln.rewards, every cheat of the adversarial corpus gets the lowest reward of its group.

Real checks (sandboxed workers, Triton's interpreter), called the way TRL's GRPO trainer calls a
reward function: prompts, completions (chat messages with a fenced block) and the dataset's
`problem` column.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kiln.evals.executors import SlottedEvaluator
from kiln.rewards import KilnReward
from kiln.tools.check import LocalEvaluator
from kiln.tools.records import CheckOptions, CheckRecord

KERNELS = Path(__file__).parents[1] / "fixtures" / "kernels"
PROBLEMS = Path(__file__).parents[1] / "fixtures" / "problems"
GROUPS = {
    "row_softmax": ["correct/triton/row_softmax.py", "adversarial/triton/torch_fallback_plain.py",
                    "adversarial/triton/decoy_kernel.py", "adversarial/triton/cached_output.py",
                    "adversarial/triton/precompute_known_seed.py", "adversarial/triton/env_read_seed.py",
                    "adversarial/triton/timer_patch_setattr.py"],
    "relu": ["correct/triton/relu.py", "adversarial/triton/relu_identity.py",
             "adversarial/triton/input_mutation_inplace.py"],
}


class Counting:
    """The real slotted evaluator, counting the checks that reach it."""

    def __init__(self) -> None:
        self.inner = SlottedEvaluator(LocalEvaluator(), [], cpu_slots=2)
        self.n_slots, self.calls, self.lock = 2, 0, threading.Lock()

    def check(self, problem: Path, candidate: Path, options: CheckOptions) -> CheckRecord:
        with self.lock:
            self.calls += 1
        return self.inner.check(problem, candidate, options)


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> tuple[KilnReward, list[str], list[float], Counting]:
    ev = Counting()
    reward = KilnReward(evaluator=ev, device="cpu", options=CheckOptions(trials=1), seed=7,
                        cache=tmp_path_factory.mktemp("cache") / "checks.sqlite", timeout_s=240)
    paths, prompts, completions, problems = [], [], [], []
    for problem, kernels in GROUPS.items():
        for k in kernels:
            paths.append(k)
            prompts.append([{"role": "user", "content": f"write {problem}"}])
            completions.append([{"role": "assistant", "content": f"Here:\n```python\n{(KERNELS / k).read_text()}```"}])
            problems.append((PROBLEMS / f"{problem}.py").read_text())
    rewards = reward(prompts=prompts, completions=completions, problem=problems)
    return reward, paths, rewards, ev


def test_every_cheat_gets_the_lowest_reward_and_the_honest_kernel_the_highest(scored) -> None:
    reward, paths, rewards, _ = scored
    by_path = dict(zip(paths, rewards, strict=True))
    statuses = {p: r.status for p, r in zip(paths, reward.records, strict=True)}
    for group in GROUPS.values():
        honest, cheats = group[0], group[1:]
        assert by_path[honest] == 1.0, statuses[honest]
        for cheat in cheats:
            assert by_path[cheat] == min(by_path[k] for k in group) == 0.0, (cheat, statuses[cheat])
            assert statuses[cheat] in ("rejected", "incorrect")
    advantages = dict(zip(paths, (d.advantage for d in reward.details), strict=True))
    assert all(advantages[g[0]] > 0 > advantages[c] for g in GROUPS.values() for c in g[1:])


def test_rewards_are_cached_and_deterministic_for_a_seed(scored) -> None:
    reward, paths, rewards, ev = scored
    calls = ev.calls
    prompts = [[{"role": "user", "content": "again"}]] * len(paths)
    completions = [(KERNELS / p).read_text() for p in paths]  # plain text this time: same code, same key
    problems = [(PROBLEMS / f"{next(k for k, v in GROUPS.items() if p in v)}.py").read_text() for p in paths]
    again = reward(prompts=prompts, completions=completions, problem=problems)
    assert ev.calls == calls  # every verdict came from the cache
    assert sorted(again) == sorted(rewards)


def test_a_completion_without_code_is_a_compile_error_through_the_real_check(scored) -> None:
    reward, *_ = scored
    out = reward(prompts=["p"], completions=["I cannot write this kernel."],
                 problem=[(PROBLEMS / "relu.py").read_text()])
    assert out == [0.0] and reward.records[0].status == "compile_error"
    with pytest.raises(ValueError, match="problem"):
        reward(prompts=["p"], completions=["x"])
