"""The frontier: the Coder's pass rate per op family and per API set, and where to sample next.

Each family and API set keeps (samples, passed). A family's pass rate p has a Beta(1 + passed,
1 + failed) posterior; the 95 % interval shown is Wilson's. An API set's weight for the next round
is the posterior mean of p(1 - p) under its Beta(a, b) posterior (below):

    w = a b / ((a + b)(a + b + 1))

p(1 - p) is the variance of a sample's pass/fail outcome, so it is largest where a group of k
samples is most likely to hold both passes and failures, which is exactly when GRPO's
group-relative advantages are non-zero (a group that always or never passes teaches nothing). The
posterior mean adds exploration: with nothing known a set weighs 1/6; one solved 10 times out of 10
weighs 0.07, one solved 5 of 10 times 0.23. A set's prior comes from its families (hierarchical):
mean = the product of their posterior mean pass rates, worth as many samples as its least-sampled
family has, at most `prior_cap`; the set's own samples are added on top. So a set never sampled
whose families the Coder always solves weighs little from the start.
"""

from __future__ import annotations

import math
import random

from pydantic import BaseModel, ConfigDict, Field

from kiln.agents.curriculum.base import ApiSet

Z95 = 1.959964


class Tally(BaseModel):
    model_config = ConfigDict(extra="forbid")

    n: int = 0
    passed: int = 0

    @property
    def rate(self) -> float | None:
        return self.passed / self.n if self.n else None

    def wilson(self) -> tuple[float, float]:
        if not self.n:
            return 0.0, 1.0
        p, n, z2 = self.passed / self.n, self.n, Z95 ** 2
        centre = (p + z2 / (2 * n)) / (1 + z2 / n)
        half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
        return max(0.0, centre - half), min(1.0, centre + half)


class FamilyPoint(BaseModel):
    """One family's standing at the start of a round (what the report plots)."""

    model_config = ConfigDict(extra="forbid")

    n: int
    passed: int
    rate: float | None
    ci_low: float
    ci_high: float
    weight: float = Field(description="frontier weight E[p(1-p)] under the family's posterior")
    chosen: int = Field(0, description="API sets chosen this round that use the family")


class Snapshot(BaseModel):
    """The frontier as one round saw it: family standings and the sets it chose, with weights."""

    model_config = ConfigDict(extra="forbid")

    round: int
    families: dict[str, FamilyPoint] = Field(default_factory=dict)
    chosen: list[ApiSet] = Field(default_factory=list)
    chosen_weights: list[float] = Field(default_factory=list)


def frontier_weight(a: float, b: float) -> float:
    """E[p(1-p)] for p ~ Beta(a, b)."""
    return a * b / ((a + b) * (a + b + 1))


class Frontier(BaseModel):
    model_config = ConfigDict(extra="forbid")

    families: dict[str, Tally] = Field(default_factory=dict)
    sets: dict[str, Tally] = Field(default_factory=dict)
    prior_cap: float = 32.0

    def record(self, api_set: ApiSet, passed: int, n: int) -> None:
        """Add one module's k samples (n of them, `passed` verified) to its set and its families."""
        for key, table in [(api_set.key, self.sets), *((f, self.families) for f in dict.fromkeys(api_set.families))]:
            t = table.setdefault(key, Tally())
            t.n += n
            t.passed += passed

    def set_weight(self, api_set: ApiSet) -> float:
        """E[p(1-p)] under the set's posterior: its own samples on top of its families' prior."""
        fams = [self.families.get(f, Tally()) for f in dict.fromkeys(api_set.families)]
        mean = math.prod((1 + f.passed) / (2 + f.n) for f in fams)
        strength = min(self.prior_cap, *(f.n for f in fams))
        t = self.sets.get(api_set.key, Tally())
        return frontier_weight(1 + strength * mean + t.passed, 1 + strength * (1 - mean) + t.n - t.passed)

    def choose(self, pool: list[ApiSet], n: int, rng: random.Random) -> tuple[list[ApiSet], list[float]]:
        """n sets from the pool, without replacement, with probability proportional to weight."""
        items = [(s, self.set_weight(s)) for s in pool]
        chosen: list[tuple[ApiSet, float]] = []
        while items and len(chosen) < n:
            total = sum(w for _, w in items)
            x, acc = rng.random() * total, 0.0
            for i, (_, w) in enumerate(items):
                acc += w
                if acc >= x or i == len(items) - 1:
                    chosen.append(items.pop(i))
                    break
        return [s for s, _ in chosen], [w for _, w in chosen]

    def snapshot(self, round_: int, names: list[str], chosen: list[ApiSet], weights: list[float]) -> Snapshot:
        fams = {}
        for name in names:
            t = self.families.get(name, Tally())
            lo, hi = t.wilson()
            fams[name] = FamilyPoint(n=t.n, passed=t.passed, rate=t.rate, ci_low=lo, ci_high=hi,
                                     weight=frontier_weight(1 + t.passed, 1 + t.n - t.passed),
                                     chosen=sum(name in s.families for s in chosen))
        return Snapshot(round=round_, families=fams, chosen=chosen, chosen_weights=weights)
