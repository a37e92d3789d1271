"""The timing primitive: CUDA events per call, L2 flushed before each call, rotating input sets
refreshed in place between calls (outside the timed region), adaptive stopping.

Order of one sample: refresh the slot's inputs in place -> flush L2 (write 2x the L2 size) -> start
event -> fn(*inputs) -> end event. Events are read back in batches, so the host never stalls the
device between samples; the flush and refresh sit between the events of consecutive calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from kiln.tools.records import TimingStat
from kiln.tools.timing.stats import MIN_SAMPLES, TARGET_HALF_WIDTH_PCT, should_stop, summarize

BATCH = 10
FALLBACK_L2_BYTES = 128 * 1024 * 1024


class L2Flusher:
    """Evicts L2 by writing a buffer twice the device's L2 size."""

    def __init__(self, device: Any) -> None:
        import torch

        props = torch.cuda.get_device_properties(device)
        l2 = int(getattr(props, "L2_cache_size", 0) or FALLBACK_L2_BYTES // 2)
        self.nbytes = 2 * l2
        self.buf = torch.empty(self.nbytes // 4, dtype=torch.int32, device=device)

    def __call__(self) -> None:
        self.buf.zero_()


class InputRotation:
    """Working input slots, refreshed in place before each call so every call sees distinct inputs.

    A pool of source sets (from `make_inputs(i)`) is cycled through; floating-point tensors are also
    scaled by a per-call factor 1 + k*2^-20 (fp16/bf16: a few ulps of their precision), so contents differ even when
    the pool wraps. Slot tensors keep their addresses: a kernel that caches by pointer sees new data
    and is caught by the re-checks; one that caches by content never gets a hit.
    """

    def __init__(self, input_sets: Sequence[tuple], n_slots: int = 2) -> None:
        import torch

        self.pool = [tuple(input_sets[i]) for i in range(len(input_sets))]
        if not self.pool:
            raise ValueError("time_callable needs at least one input set")
        self.slots = [tuple(_clone(a) for a in self.pool[i % len(self.pool)]) for i in range(n_slots)]
        self.calls = 0
        self._torch = torch

    def next(self) -> tuple:
        n = self.calls
        self.calls += 1
        slot = self.slots[n % len(self.slots)]
        src = self.pool[n % len(self.pool)]
        with self._torch.no_grad():
            for dst, s in zip(slot, src, strict=True):
                if isinstance(dst, self._torch.Tensor):
                    dst.copy_(s)
                    if dst.is_floating_point():
                        dst.mul_(_scale(n, dst.dtype))
        return slot


def _scale(n: int, dtype: Any) -> float:
    """A per-call factor just above 1 that still changes values at this dtype's precision."""
    import torch

    if dtype in (torch.float16, torch.bfloat16):
        step = 2.0**-10 if dtype == torch.float16 else 2.0**-7
        return 1.0 + ((n % 7) + 1) * step
    return 1.0 + ((n % 4093) + 1) * 2.0**-20


def _clone(a: Any) -> Any:
    return a.clone() if hasattr(a, "clone") else a


def _sync() -> None:
    import torch

    torch.cuda.synchronize()


def warm_up(fn: Callable[..., Any], rot: InputRotation, *, min_calls: int = 3, target_s: float = 0.05) -> float:
    """Run fn until `min_calls` and ~target_s of work; returns the estimated seconds per call."""
    t0 = time.perf_counter()
    fn(*rot.next())
    _sync()
    est = max(time.perf_counter() - t0, 1e-6)
    n = int(min(100, max(min_calls, target_s / est)))
    t0 = time.perf_counter()
    for _ in range(n):
        fn(*rot.next())
    _sync()
    return (time.perf_counter() - t0) / n


def time_callable(fn: Callable[..., Any], input_sets: Sequence[tuple], *, max_time_s: float = 10.0,
                  min_samples: int = MIN_SAMPLES, target_pct: float = TARGET_HALF_WIDTH_PCT,
                  max_samples: int = 10_000, flush: Callable[[], None] | None = None,
                  on_output: Callable[[int, tuple, Any], None] | None = None,
                  on_batch: Callable[[], None] | None = None) -> tuple[TimingStat, list[float]]:
    """Time fn(*inputs) per call in microseconds. Returns the summary and the raw samples.

    `flush` evicts L2 before each call (pass an L2Flusher; None = no flush). `on_output(i, inputs,
    out)` is called after the batch of sample i completed (outside the timed region), with the
    inputs that call saw still intact, for re-checking timed outputs. `on_batch()` runs after each
    batch (e.g. an NVML throttle sample).
    """
    import torch

    rot = InputRotation(input_sets)
    warm_up(fn, rot)
    samples: list[float] = []
    next_check = min_samples
    t_start = time.perf_counter()
    while True:
        events = []
        keep: list[tuple[int, tuple, Any]] = []
        for _ in range(BATCH):
            inputs = rot.next()
            if flush is not None:
                flush()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = fn(*inputs)
            end.record()
            events.append((start, end))
            if on_output is not None and _wants_check(len(samples) + len(events) - 1):
                keep.append((len(samples) + len(events) - 1, inputs, out))
                break  # the next refresh would overwrite this slot: end the batch here
        end.synchronize()
        samples += [s.elapsed_time(e) * 1000.0 for s, e in events]
        for i, inputs, out in keep:
            on_output(i, inputs, out)  # type: ignore[misc]
        if on_batch is not None:
            on_batch()
        elapsed = time.perf_counter() - t_start
        if len(samples) < next_check and elapsed < max_time_s and len(samples) < max_samples:
            continue  # the bootstrap is re-run only when the sample count grew by 10%
        next_check = int(len(samples) * 1.1) + 1
        stop, _ = should_stop(samples, elapsed, max_time_s=max_time_s, min_samples=min_samples,
                              target_pct=target_pct, max_samples=max_samples)
        if stop:
            return summarize(samples), samples


def _wants_check(i: int) -> bool:
    """Re-check timed outputs at calls 0, 1, 3, 7, 15, ... (a handful per run, spread out)."""
    return (i + 1) & i == 0
