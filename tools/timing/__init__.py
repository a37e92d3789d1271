"""kiln.tools.timing: honest GPU timing (CUDA events, L2 flush, rotating inputs, bootstrap CIs)."""

from kiln.tools.timing.bench import InputRotation, L2Flusher, time_callable
from kiln.tools.timing.stage import peak_memory, run_timing_stage, wall_over_event
from kiln.tools.timing.stats import bootstrap_median_ci, half_width_pct, should_stop, speedup, summarize

__all__ = [
    "InputRotation",
    "L2Flusher",
    "bootstrap_median_ci",
    "half_width_pct",
    "peak_memory",
    "run_timing_stage",
    "should_stop",
    "speedup",
    "summarize",
    "time_callable",
    "wall_over_event",
]
