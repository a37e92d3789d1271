"""How one check's time is shared: each stage's budget (a share of --timeout unless given), counted
only while the candidate's own commands run; the whole check never runs past --timeout."""

from __future__ import annotations

from kiln.tools.records import CheckOptions

STAGE_SHARES = {"compile": 0.5, "correctness": 0.3, "integrity": 0.3, "timing": 0.3}
EXTRA_ROUND_MIN_TRIALS = 10


def stage_timeouts(o: CheckOptions) -> dict[str, float]:
    explicit = {"compile": o.compile_timeout_s, "correctness": o.correctness_timeout_s,
                "timing": o.timing_timeout_s}
    return {k: explicit.get(k) or share * o.timeout_s for k, share in STAGE_SHARES.items()}
