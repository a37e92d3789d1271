"""The loop's two stop rules, written once: "the target is met" and "at the roofline". The graph's
hard rules (kiln.graphs.rules), the LLM Judge's rules (kiln.agents.judge) and the built-in Judge all
ask these, so a kernel that meets the target for one of them meets it for all.

- **Target met:** the speedup's 95% CI low end reaches the target. A median above the target whose
  CI reaches below it may be noise (the next timing can fall short), so it does not count; this is
  what `--target-speedup` says. A speedup recorded without a CI is judged by its value. Where speed
  is not measured (a CPU run), correctness is the goal: the target counts as met.
- **At the roofline:** the kernel runs at >= `ROOFLINE_STOP_PCT`% of its physics floor. The rules do
  not stop there when the reference's FLOPs set that floor far above the I/O floor (`floors_differ`):
  a simplification that does less work may beat it, and the Judge, told both floors, decides.
"""

from __future__ import annotations

ROOFLINE_STOP_PCT = 90.0


def target_met(speedup: float | None, ci_low: float | None, target: float, *, measured: bool = True) -> bool:
    """`speedup` (median) and `ci_low` against the target's baseline; `measured=False`: speed is not
    measured where the run is (met). Measured but `speedup` None (that baseline was not timed): not met."""
    if not measured:
        return True
    if speedup is None:
        return False
    return (ci_low if ci_low is not None else speedup) >= target


def at_roofline(pct: float | None, *, floors_differ: bool = False, stop_pct: float = ROOFLINE_STOP_PCT) -> bool:
    """`pct`: % of the roofline floor the kernel reaches (floor / measured time)."""
    return not floors_differ and pct is not None and pct >= stop_pct
