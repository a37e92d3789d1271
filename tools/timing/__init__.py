"""kiln.tools.timing: honest GPU timing (CUDA events, L2 flush, fresh inputs per call, timed
outputs sketched, bootstrap CIs). Workers time; the parent computes statistics and speedups."""

from kiln.tools.timing.bench import InputRotation, L2Flusher, Timed, TimedInputs, time_callable, timing_sketch
from kiln.tools.timing.stage import n_input_sets, peak_bytes, run_loop, wall_over_event
from kiln.tools.timing.stats import bootstrap_median_ci, half_width_pct, should_stop, speedup, summarize

__all__ = [
    "InputRotation",
    "L2Flusher",
    "Timed",
    "TimedInputs",
    "bootstrap_median_ci",
    "half_width_pct",
    "n_input_sets",
    "peak_bytes",
    "run_loop",
    "should_stop",
    "speedup",
    "summarize",
    "time_callable",
    "timing_sketch",
    "wall_over_event",
]
