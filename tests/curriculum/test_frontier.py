"""The frontier: pass rates with confidence, E[p(1-p)] weights, and choices that move between rounds."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from kiln.agents.curriculum.base import ApiSet
from kiln.evals.curriculum.frontier import Frontier, Tally, frontier_weight


def _set(op: str, fam: str) -> ApiSet:
    return ApiSet(ops=[op], families=[fam])


def test_weight_is_the_posterior_mean_of_p_times_one_minus_p() -> None:
    assert frontier_weight(1, 1) == pytest.approx(1 / 6)
    assert frontier_weight(11, 1) == pytest.approx(11 / 156)
    assert frontier_weight(6, 6) == pytest.approx(36 / 156)
    lo, hi = Tally(n=10, passed=5).wilson()
    assert lo < 0.5 < hi and hi - lo < 0.7
    assert Tally(n=0).wilson() == (0.0, 1.0)


def test_unseen_sets_borrow_their_families_rates() -> None:
    fr = Frontier()
    fr.record(_set("a", "easy"), passed=10, n=10)
    fr.record(_set("b", "medium"), passed=5, n=10)
    mixed = ApiSet(ops=["a2", "b2"], families=["easy", "medium"])
    assert fr.set_weight(_set("a2", "easy")) < fr.set_weight(mixed)
    assert fr.set_weight(_set("a2", "easy")) < 1 / 6 < fr.set_weight(_set("b2", "medium"))


def _simulate(rounds: int, per_round: int, rates: dict[str, float], seed: int = 0) -> list[Counter]:
    """The Coder solves family f with probability rates[f]; 4 samples per module."""
    rng = random.Random(seed)
    pool = [_set(f"{fam}_{i}", fam) for fam in rates for i in range(20)]
    fr, shares = Frontier(), []
    for _ in range(rounds):
        chosen, _ = fr.choose(pool, per_round, rng)
        shares.append(Counter(s.families[0] for s in chosen))
        for s in chosen:
            fr.record(s, passed=sum(rng.random() < rates[s.families[0]] for _ in range(4)), n=4)
    return shares


def test_the_choice_moves_toward_families_with_intermediate_pass_rates() -> None:
    rates = {"solved": 1.0, "hopeless": 0.0, "frontier": 0.5}
    totals = {"first": Counter(), "last": Counter()}
    for seed in range(20):
        shares = _simulate(4, 6, rates, seed)
        totals["first"] += shares[0]
        totals["last"] += shares[-1]
    last = totals["last"]
    share = {k: c["frontier"] / sum(c.values()) for k, c in totals.items()}
    assert share["last"] > share["first"] + 0.1  # round 0 knows nothing: about a third each
    assert last["frontier"] > last["solved"] + last["hopeless"] - 10


def test_snapshot_records_each_familys_standing() -> None:
    fr = Frontier()
    fr.record(ApiSet(ops=["x", "y"], families=["f", "f"]), passed=3, n=4)
    snap = fr.snapshot(2, ["f", "g"], [], [])
    assert snap.families["f"].n == 4 and snap.families["f"].rate == 0.75  # a family counts a module once
    assert snap.families["g"].n == 0 and snap.families["g"].weight == pytest.approx(1 / 6)
