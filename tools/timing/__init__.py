"""kiln.tools.timing: honest GPU timing. `laps` is the harness the check's workers run (kiln's
clock outside them times each step), `audit` binds the timed outputs, `stats` the statistics and
speedups (bootstrap CIs), `bench` an in-process CUDA-event timer for benchmarks and profiling
(never a check's figure), `stage` the baselines and peak memory."""

from kiln.tools.timing.bench import InputRotation, L2Flusher, Timed, TimedInputs, time_callable, timing_sketch
from kiln.tools.timing.stage import peak_bytes
from kiln.tools.timing.stats import bootstrap_median_ci, half_width_pct, should_stop, speedup, summarize

__all__ = [
    "InputRotation",
    "L2Flusher",
    "Timed",
    "TimedInputs",
    "bootstrap_median_ci",
    "half_width_pct",
    "peak_bytes",
    "should_stop",
    "speedup",
    "summarize",
    "time_callable",
    "timing_sketch",
]
