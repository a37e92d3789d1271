"""The timing primitive: CUDA events per call, L2 flushed before each call, fresh inputs every call
(refreshed in place, outside the timed region), every timed output sketched, adaptive stopping.

Order of one sample, all on the current stream, the host never waiting: refresh the slot's inputs
-> flush L2 (write 2x the L2 size) -> start event -> fn(*inputs) -> end event -> sketch the output.
Events and sketches are read back once per batch.

Inputs (`TimedInputs`): a pool of sets drawn from the timing key; call k sees pool[k % P] with every
floating element multiplied by (1 + d*u), u uniform in [-1, 1) drawn afresh for that call from the
key, d a few units of the dtype's precision. Slot tensors keep their addresses, so a kernel that
caches by pointer gets stale answers; the noise is new on every call, so no answer can be derived
from an earlier call's (x*(1+d*u) shares no linear relation with earlier inputs). The same key
reproduces any call's inputs in another process: the reference worker recomputes the outputs of a
few timed calls picked by the parent, whose sketches the parent compares with the candidate's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from kiln.tools.records import TimingStat
from kiln.tools.timing.stats import MIN_SAMPLES, TARGET_HALF_WIDTH_PCT, should_stop, summarize

BATCH = 10
FALLBACK_L2_BYTES = 128 * 1024 * 1024
SKETCH_UNIFORM, SKETCH_EDGE = 1024, 256  # positions of a timed output kept per call (see timing_sketch)


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


def _noise_step(dtype: Any) -> float:
    """Relative size of the per-call perturbation: a few units of the dtype's precision."""
    import torch

    if dtype == torch.float16:
        return 2.0**-8
    if dtype == torch.bfloat16:
        return 2.0**-5
    return 2.0**-18


class TimedInputs:
    """Every timed call's inputs, reproducible from (pool, key): see the module docstring."""

    def __init__(self, pool: Sequence[tuple], key: int) -> None:
        if not pool:
            raise ValueError("timing needs at least one input set")
        self.pool, self.key = [tuple(s) for s in pool], key
        self._noise: dict[tuple, Any] = {}

    @classmethod
    def from_spec(cls, spec: dict[str, Any], get_inputs: Callable[[], Any], *, dtype: str, device: str) -> TimedInputs:
        """The pool the parent's timing spec ({'key', 'n_sets'}) names, drawn from the problem's get_inputs."""
        from kiln.tools.inputs import derive_seed, inputs_from_seed

        key = int(spec["key"])
        pool = [inputs_from_seed(get_inputs, seed=derive_seed(key, "set", i), dist="x1", dtype=dtype, device=device)
                for i in range(int(spec.get("n_sets", 1)))]
        return cls(pool, key)

    def refresh(self, slot: tuple, k: int) -> tuple:
        """Write call k's inputs into `slot` (same tensors, new values)."""
        import torch

        with torch.no_grad():
            for j, (dst, src) in enumerate(zip(slot, self.pool[k % len(self.pool)], strict=True)):
                if isinstance(dst, torch.Tensor):
                    dst.copy_(src)
                    self._perturb(dst, k, j)
        return slot

    def for_call(self, k: int) -> tuple:
        """Call k's inputs as fresh tensors (bitwise what `refresh` writes)."""
        return self.refresh(tuple(_clone(a) for a in self.pool[k % len(self.pool)]), k)

    def new_slot(self) -> tuple:
        return tuple(_clone(a) for a in self.pool[0])

    def _perturb(self, t: Any, k: int, j: int) -> None:
        import torch

        from kiln.tools.inputs import derive_seed

        if not t.is_floating_point() or t.numel() == 0:
            return
        buf = self._noise.get((tuple(t.shape), t.dtype, str(t.device)))
        if buf is None:
            buf = self._noise[(tuple(t.shape), t.dtype, str(t.device))] = torch.empty_like(t)
        gen = torch.Generator(device=t.device)
        gen.manual_seed(derive_seed(self.key, "call", k, j))
        buf.uniform_(-1.0, 1.0, generator=gen)
        t.mul_(buf.mul_(_noise_step(t.dtype)).add_(1.0))


class InputRotation:
    """Working input slots refreshed from a `TimedInputs` before each call (`next()`)."""

    def __init__(self, feed: TimedInputs | Sequence[tuple], n_slots: int = 2) -> None:
        self.feed = feed if isinstance(feed, TimedInputs) else TimedInputs(feed, key=0)
        self.slots = [self.feed.new_slot() for _ in range(n_slots)]
        self.calls = 0

    def next(self) -> tuple:
        k = self.calls
        self.calls += 1
        return self.feed.refresh(self.slots[k % len(self.slots)], k)


def _clone(a: Any) -> Any:
    return a.clone() if hasattr(a, "clone") else a


class HostEvent:
    """A stand-in for torch.cuda.Event on the CPU, where every op runs synchronously: records the
    host clock. Only for exercising the timing protocol without a GPU (`CheckOptions.time_on_cpu`):
    under the Triton interpreter the numbers mean nothing."""

    def __init__(self, enable_timing: bool = True) -> None:
        self.t = 0.0

    def record(self) -> None:
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        return None

    def elapsed_time(self, end: HostEvent) -> float:
        return (end.t - self.t) * 1e3


def _is_cuda() -> bool:
    import torch

    return torch.cuda.is_available() and torch.cuda.is_initialized()


def new_event() -> Any:
    import torch

    return torch.cuda.Event(enable_timing=True) if _is_cuda() else HostEvent()


def _sync() -> None:
    import torch

    if _is_cuda():
        torch.cuda.synchronize()


def timing_sketch(out: Any, key: int) -> dict[str, Any]:
    """A small sketch of one forward() result (CPU data): per tensor, values at `SKETCH_UNIFORM` +
    `SKETCH_EDGE` positions drawn from the key and the shape, and whole-tensor NaN/inf counts and
    sum of |x|. Both sides of a timed-output re-check make it with the same key."""
    return finish_sketch(start_sketch(out, key))


def start_sketch(out: Any, key: int) -> list[Any]:
    """The device-side part of `timing_sketch`: enqueued on the stream, nothing waits for it."""
    import torch

    from kiln.tools import sketch

    parts: list[Any] = []
    for i, t in enumerate(_flat(out)):
        if not isinstance(t, torch.Tensor) or t.numel() == 0 or type(t) is not torch.Tensor:
            parts.append(("other", repr(type(t).__name__) if not isinstance(t, (int, float)) else t))
            continue
        flat = t.detach().reshape(-1)
        seed = (key + i) & ((1 << 63) - 1)
        pos = sketch.positions_on(str(flat.device), tuple(t.shape), seed, SKETCH_UNIFORM, SKETCH_EDGE)
        parts.append(("tensor", list(t.shape), str(t.dtype), flat[pos].clone(), _device_stats(flat), seed,
                      sketch.sketch_device(str(flat.device))))
    return parts


def finish_sketch(parts: list[Any]) -> dict[str, Any]:
    """The CPU side: copy what `start_sketch` computed (waits for it). Each tensor output becomes a
    sketch in `kiln.tools.sketch`'s format, so `correctness.compare_sketches` compares two of them."""
    out: dict[str, Any] = {"outputs": []}
    for p in parts:
        if p[0] != "tensor":
            out["outputs"].append({"kind": "other", "value": p[1]})
            continue
        _, shape, dtype, values, stats, seed, device = p
        nan, posinf, neginf, sum_abs = (float(x) for x in stats.cpu())
        out["outputs"].append({"kind": "sketch", "shape": shape, "dtype": dtype, "seed": seed,
                               "n_uniform": SKETCH_UNIFORM, "n_edge": SKETCH_EDGE, "device": device,
                               "values": values.cpu(), "nan": int(nan), "posinf": int(posinf), "neginf": int(neginf), "sum_abs": sum_abs})
    return out


def _device_stats(flat: Any) -> Any:
    """[NaN count, +inf count, -inf count, float64 sum of finite |x|] as one device tensor, in
    slices (no whole-tensor temporaries), without a host sync."""
    import torch

    from kiln.tools import chunked

    acc = torch.zeros(4, dtype=torch.float64, device=flat.device)
    for _, s in chunked.slices(flat):
        f = s if s.is_floating_point() else s.double()
        acc[0] += torch.isnan(f).sum()
        acc[1] += (f == float("inf")).sum()
        acc[2] += (f == float("-inf")).sum()
        acc[3] += torch.where(torch.isfinite(f), f, 0.0).abs().sum(dtype=torch.float64)
    return acc


def _flat(out: Any) -> list[Any]:
    if isinstance(out, (tuple, list)):
        return [x for item in out for x in _flat(item)]
    return [out]


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


class Timed:
    """What one timing run produced: the samples (us per call), and, when asked for, each timed
    call's output sketch keyed by its call index (the index `TimedInputs` reproduces it from)."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self.sketches: dict[int, dict[str, Any]] = {}
        self.first_call = 0

    @property
    def stat(self) -> TimingStat:
        return summarize(self.samples)


def time_callable(fn: Callable[..., Any], feed: TimedInputs | Sequence[tuple], *, max_time_s: float = 10.0,
                  min_samples: int = MIN_SAMPLES, target_pct: float = TARGET_HALF_WIDTH_PCT,
                  max_samples: int = 10_000, flush: Callable[[], None] | None = None,
                  sketch_key: int | None = None, on_batch: Callable[[], None] | None = None,
                  warmed: InputRotation | None = None) -> Timed:
    """Time fn(*inputs) per call in microseconds, adaptively (see `should_stop`).

    `flush` evicts L2 before each call (pass an L2Flusher; None = no flush). With `sketch_key`,
    every timed call's output is sketched (`timing_sketch`) outside the timed region. `on_batch()`
    runs after each batch (e.g. an NVML throttle sample). `warmed`: a rotation `warm_up` already
    ran on (so the warm-up stays out of a caller's clock around this loop)."""
    rot = warmed or InputRotation(feed)
    if warmed is None:
        warm_up(fn, rot)
    run = Timed()
    run.first_call = rot.calls
    next_check = min_samples
    t_start = time.perf_counter()
    while True:
        _one_batch(fn, rot, run, flush, sketch_key)
        if on_batch is not None:
            on_batch()
        elapsed = time.perf_counter() - t_start
        n = len(run.samples)
        if n < next_check and elapsed < max_time_s and n < max_samples:
            continue  # the bootstrap is re-run only when the sample count grew by 10%
        next_check = int(n * 1.1) + 1
        stop, _ = should_stop(run.samples, elapsed, max_time_s=max_time_s, min_samples=min_samples,
                              target_pct=target_pct, max_samples=max_samples)
        if stop:
            return run


def _one_batch(fn: Callable[..., Any], rot: InputRotation, run: Timed, flush: Callable[[], None] | None,
               sketch_key: int | None) -> None:
    events, pending = [], []
    for _ in range(BATCH):
        k = rot.calls
        inputs = rot.next()
        if flush is not None:
            flush()
        start, end = new_event(), new_event()
        start.record()
        out = fn(*inputs)
        end.record()
        events.append((start, end))
        if sketch_key is not None:
            pending.append((k, start_sketch(out, sketch_key)))
        del out
    end.synchronize()
    run.samples += [s.elapsed_time(e) * 1000.0 for s, e in events]
    for k, parts in pending:
        run.sketches[k] = finish_sketch(parts)
