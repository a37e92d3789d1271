"""Search strategies and the correctness-gated reward, on hand-built candidate trees."""

from __future__ import annotations

import math

import pytest

from kiln.graphs.context import RunOptions
from kiln.graphs.reward import reward_of
from kiln.graphs.state import Candidate, TreeStats
from kiln.graphs.strategies import ROOT, next_frontier, parents_for_round
from kiln.tools.records import CheckRecord, CorrectnessRecord, Speedup, TimingRecord


def cand(cid: str, reward: float, parent: str | None = None, code: bool = True) -> Candidate:
    return Candidate(id=cid, parent=parent, iteration=1, mode="generate", reward=reward,
                     source_path=f"candidates/{cid}/kernel.py" if code else None)


def opts(strategy: str, **kw) -> RunOptions:
    return RunOptions(problem="/p.py", strategy=strategy, **kw)


def test_linear_refines_the_last_child():
    state = {"candidates": {"c0001": cand("c0001", 0.5)}, "frontier": []}
    assert parents_for_round(state, opts("linear")) == [None]
    frontier, _ = next_frontier(state, ["c0001"], opts("linear"))
    assert frontier == ["c0001"]
    assert parents_for_round({**state, "frontier": frontier}, opts("linear")) == ["c0001"]


def test_beam_writes_k_children_per_member_and_keeps_the_best_b():
    o = opts("beam", beam_width=2, beam_children=3)
    assert parents_for_round({"frontier": []}, o) == [None, None, None]
    cands = {c.id: c for c in [cand("c0001", 0.2), cand("c0002", 1.0), cand("c0003", 0.7),
                               cand("c0004", 0.0, code=False)]}
    frontier, _ = next_frontier({"candidates": cands, "frontier": []}, list(cands), o)
    assert frontier == ["c0002", "c0003"]
    assert parents_for_round({"frontier": frontier}, o) == ["c0002"] * 3 + ["c0003"] * 3
    cands["c0005"] = cand("c0005", 2.3, parent="c0003")
    frontier, _ = next_frontier({"candidates": cands, "frontier": frontier}, ["c0005"], o)
    assert frontier == ["c0005", "c0002"]


def test_mcts_expands_the_root_first_then_descends_by_uct():
    o = opts("mcts", mcts_children=2, mcts_c=0.5)
    cands = {"c0001": cand("c0001", 0.2)}
    frontier, tree = next_frontier({"candidates": cands, "tree": {}}, ["c0001"], o)
    assert frontier == [ROOT] and tree[ROOT] == TreeStats(visits=1, value_sum=0.2)
    assert parents_for_round({"frontier": frontier}, o) == [None]  # root: generate a sibling
    cands["c0002"] = cand("c0002", 1.0)
    frontier, upd = next_frontier({"candidates": cands, "tree": tree}, ["c0002"], o)
    tree = {**tree, **upd}
    assert frontier == ["c0002"]  # root full: UCT picks the better child
    assert tree[ROOT].visits == 2 and tree[ROOT].value_sum == pytest.approx(1.2)
    cands["c0003"] = cand("c0003", 0.1, parent="c0002")
    frontier, upd = next_frontier({"candidates": cands, "tree": tree}, ["c0003"], o)
    assert upd["c0002"] == TreeStats(visits=2, value_sum=1.1) and upd[ROOT].visits == 3
    assert frontier == ["c0002"]  # c0002 still has room for a second child


def _record(n_passed: int, n_trials: int, status: str = "ok", speedup: float | None = None) -> CheckRecord:
    timing = None
    if speedup is not None:
        timing = TimingRecord(measured=True, speedups={"eager": Speedup(baseline="eager", value=speedup, ci_low=speedup,
                                                                       ci_high=speedup, verdict="faster")})
    correct = n_passed == n_trials and status == "ok"
    return CheckRecord(problem="p", candidate="c", status=status, correct=correct, timing=timing,
                       correctness=CorrectnessRecord(passed=correct, atol=1e-4, rtol=1e-4, n_trials=n_trials,
                                                     n_passed=n_passed))


def test_reward_is_gated_on_correctness():
    failing = reward_of(_record(3, 4, "incorrect"))
    assert failing.reward == 0.75 and not failing.correct
    assert reward_of(_record(4, 4, "rejected")).reward == 0.0  # a cheat earns nothing
    assert reward_of(_record(4, 4)).reward == 1.0  # correct, speed not measured
    slow, fast = reward_of(_record(4, 4, speedup=0.5)), reward_of(_record(4, 4, speedup=3.0))
    assert fast.reward == pytest.approx(2 + math.log(3.0)) and fast.log_speedup == pytest.approx(math.log(3.0))
    assert 1.0 <= slow.reward < fast.reward and slow.reward > failing.reward
