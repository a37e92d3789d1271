"""Pure statistics for timing: bootstrap CI of the median, the adaptive stopping rule, speedups.

No torch, no GPU: unit-tested on CPU with synthetic samples. Resampling uses a fixed-seed generator,
so the same samples always give the same interval.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kiln.tools.records import Speedup, TimingStat

N_BOOT = 2000
CONF = 0.95
MIN_SAMPLES = 30
TARGET_HALF_WIDTH_PCT = 1.0
RUN_TO_RUN = 0.01
"""Relative spread a speedup must clear beyond its own CI to be called faster or slower: the CI
covers one run's noise only, and the same candidate re-checked on the H200 moved by up to 0.46 %
(max/min of three checks' medians, bench/RESULTS.md); a 0.4 % 'faster' would not survive a rerun."""
_MAX_BOOT_ELEMS = 4_000_000  # caps B*n so a bootstrap stays ~10s of ms


def _rng() -> np.random.Generator:
    return np.random.default_rng(0x6B696C6E)


def _boot_medians(x: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    n_boot = max(200, min(n_boot, _MAX_BOOT_ELEMS // max(1, len(x))))
    idx = rng.integers(0, len(x), size=(n_boot, len(x)))
    return np.median(x[idx], axis=1)


def bootstrap_median_ci(samples: Sequence[float], *, conf: float = CONF, n_boot: int = N_BOOT) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of the median."""
    x = np.asarray(samples, dtype=float)
    if len(x) == 0:
        raise ValueError("no samples")
    if len(x) == 1:
        return float(x[0]), float(x[0])
    meds = _boot_medians(x, n_boot, _rng())
    a = (1 - conf) / 2
    return float(np.quantile(meds, a)), float(np.quantile(meds, 1 - a))


def half_width_pct(samples: Sequence[float]) -> float:
    lo, hi = bootstrap_median_ci(samples)
    med = float(np.median(samples))
    return 100.0 * (hi - lo) / 2 / med if med > 0 else float("inf")


def summarize(samples: Sequence[float]) -> TimingStat:
    x = np.asarray(samples, dtype=float)
    lo, hi = bootstrap_median_ci(samples)
    med = float(np.median(x))
    return TimingStat(median_us=med, ci_low_us=lo, ci_high_us=hi,
                      half_width_pct=100.0 * (hi - lo) / 2 / med if med > 0 else float("inf"),
                      n_samples=len(x), mean_us=float(x.mean()), min_us=float(x.min()))


def should_stop(samples: Sequence[float], elapsed_s: float, *, max_time_s: float,
                min_samples: int = MIN_SAMPLES, target_pct: float = TARGET_HALF_WIDTH_PCT,
                max_samples: int = 10_000) -> tuple[bool, str]:
    """The adaptive rule: never before `min_samples`; then stop when the 95% CI half-width of the
    median is <= target_pct, or when the time cap or the sample cap is reached."""
    n = len(samples)
    if n < min_samples:
        return False, "min-samples"
    if n >= max_samples:
        return True, "max-samples"
    if half_width_pct(samples) <= target_pct:
        return True, "converged"
    if elapsed_s >= max_time_s:
        return True, "time-cap"
    return False, "continue"


def speedup(baseline_us: Sequence[float], candidate_us: Sequence[float], *, name: str,
            threshold: float = 1.0) -> Speedup:
    """baseline median / candidate median, with a 95% bootstrap CI of that ratio (both sides
    resampled independently). 'faster' only if the CI's low end clears threshold by `RUN_TO_RUN`,
    'slower' if its high end is that far below 1, otherwise 'tie'."""
    b = np.asarray(baseline_us, dtype=float)
    c = np.asarray(candidate_us, dtype=float)
    rng = _rng()
    n_boot = min(N_BOOT, _MAX_BOOT_ELEMS // max(1, len(b), len(c)))
    ratios = _boot_medians(b, n_boot, rng)[:n_boot] / _boot_medians(c, n_boot, rng)[:n_boot]
    a = (1 - CONF) / 2
    lo, hi = float(np.quantile(ratios, a)), float(np.quantile(ratios, 1 - a))
    value = float(np.median(b) / np.median(c))
    verdict = "faster" if lo > threshold * (1 + RUN_TO_RUN) else "slower" if hi < 1.0 / (1 + RUN_TO_RUN) else "tie"
    return Speedup(baseline=name, value=value, ci_low=lo, ci_high=hi, verdict=verdict)
