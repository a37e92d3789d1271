"""The trials' distributions and seeds (no torch: kiln's own process plans and seeds trials, and never
imports torch for a check). `kiln.tools.inputs` draws the inputs and re-exports these."""

from __future__ import annotations

import hashlib
from typing import NamedTuple


class Distribution(NamedTuple):
    scale: float
    words: str
    wide: bool = False  # dropped for a problem whose reference is not finite on it
    heavy: bool = False  # times a per-element heavy-tailed factor (same sign pattern)


DISTRIBUTIONS: dict[str, Distribution] = {
    "x1": Distribution(1.0, "inputs as drawn by get_inputs()"),
    "x3": Distribution(3.0, "inputs scaled x3"),
    "x0.01": Distribution(0.01, "inputs scaled x0.01"),
    "neg": Distribution(-1.0, "inputs negated (x -1)"),
    "x1000": Distribution(1000.0, "inputs scaled x1000", wide=True),
    "x0.001": Distribution(0.001, "inputs scaled x0.001", wide=True),
    "heavy": Distribution(1.0, "inputs times a heavy-tailed factor exp(2z), same signs", wide=True, heavy=True),
}
HEAVY_SIGMA, HEAVY_CLIP = 2.0, 4.0


def trial_count(dist: str, trials: int) -> int:
    """Trials per case for one distribution: `trials` for the four basic ones, half (at least one)
    for the wide ones, whose job (reaching the op's whole domain) one or two draws already do."""
    return max(1, trials // 2) if DISTRIBUTIONS[dist].wide else trials


def derive_seed(secret: int, *parts: object) -> int:
    """A 63-bit seed for one (case, distribution, trial), not guessable without the secret."""
    digest = hashlib.sha256(repr((secret, *parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1
