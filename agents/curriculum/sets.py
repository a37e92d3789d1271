"""Draw API sets from the catalogue: 1-4 ops that compose into one module."""

from __future__ import annotations

import random

from kiln.agents.curriculum.base import ApiSet
from kiln.agents.curriculum.catalogue import Catalogue, OpSpec
from kiln.agents.curriculum.shapes import PROFILES, plan_chain


def api_set_of(ops: list[OpSpec]) -> ApiSet:
    return ApiSet(ops=[o.name for o in ops], families=[o.family for o in ops])


def composable(ops: list[OpSpec], device: str, tries: int = 4) -> bool:
    """Can the template writer compose these ops in this order (some rank and sizes fit)?"""
    rng = random.Random(0)
    return any(plan_chain(ops, rng, PROFILES[device], PROFILES[device].max_numel) for _ in range(tries))


def random_api_set(cat: Catalogue, rng: random.Random, *, device: str, max_ops: int = 4,
                   attempts: int = 50) -> ApiSet | None:
    """A random composable API set: first a family, then an op of it, for each of 1..max_ops ops
    (so a family with many ops is not drawn more often than one with few)."""
    for _ in range(attempts):
        n = rng.randint(1, max_ops)
        ops = [rng.choice(cat.families[rng.choice(list(cat.families))].op) for _ in range(n)]
        if composable(ops, device):
            return api_set_of(ops)
    return None


def candidate_pool(cat: Catalogue, rng: random.Random, *, device: str, size: int, max_ops: int = 4) -> list[ApiSet]:
    """Up to `size` distinct random composable API sets (distinct by op order)."""
    seen: dict[tuple[str, ...], ApiSet] = {}
    for _ in range(size * 3):
        s = random_api_set(cat, rng, device=device, max_ops=max_ops)
        if s is not None:
            seen.setdefault(tuple(s.ops), s)
        if len(seen) >= size:
            break
    return list(seen.values())
