"""Patched groups measured inside the model (GPU): the decision to patch is taken here, on the whole
forward, not on a kernel timed alone.

- Variants of one model (eager, each group patched alone, the kept set) are applied once and toggled
  (`Applied.install/remove`), and timed in turns (a, b, c, c, b, a, ...), so clock and heat drift hit
  every variant alike. Each sample is one forward between CUDA events after a synchronize: what a
  caller waits for, the patch runtime's host work (the guard, the TorchFunctionMode, the launches)
  included. The host's issue time of each forward is recorded too.
- A group stays patched when the forward with it alone is not slower than eager (point estimate at
  least 1) and its kernel was faster alone with confidence; a kernel that was not faster alone needs
  the forward to be faster with confidence. Then, while the kept set's forward is slower than eager
  (point estimate), the group with the least in-model gain is unpatched: never slower than eager.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from kiln.evals.model.apply import Applied
from kiln.evals.model.bundle import Bundle
from kiln.evals.model.targets import Target
from kiln.tools.records import Speedup
from kiln.tools.timing.stats import speedup, summarize


@dataclass
class Variant:
    name: str
    handle: Applied | None  # None: the original model


@dataclass
class Samples:
    gpu_us: dict[str, list[float]]
    """Per forward, start event to end event (what a caller waits for)."""
    host_us: dict[str, list[float]]
    """Per forward, the host's time to issue it (no synchronize inside)."""


def forward(t: Target) -> Callable[[], Any]:
    def fn() -> Any:
        with torch.no_grad():
            return t.call()
    return fn


def on_gpu(t: Target) -> bool:
    return any(p.is_cuda for p in t.model.parameters()) or any(
        isinstance(a, torch.Tensor) and a.is_cuda for a in (*t.args, *t.kwargs.values()))


def _select(variants: list[Variant], v: Variant) -> None:
    for other in variants:
        if other.handle is not None and other is not v:
            other.handle.remove()
    if v.handle is not None:
        v.handle.install()


def _one(fn: Callable[[], Any], cuda: bool) -> tuple[float, float]:
    """(us from start to end of one forward, us the host took to issue it). Without CUDA (the CPU
    tests of these rules) both are the host clock."""
    if not cuda:
        h0 = time.perf_counter()
        fn()
        us = (time.perf_counter() - h0) * 1e6
        return us, us
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    h0 = time.perf_counter()
    a.record()
    fn()
    b.record()
    host = (time.perf_counter() - h0) * 1e6
    b.synchronize()
    return a.elapsed_time(b) * 1e3, host


def interleaved(fn: Callable[[], Any], variants: list[Variant], max_s: float, *, cuda: bool, min_rounds: int = 15,
                max_rounds: int = 400, tight_pct: float = 0.5) -> Samples:
    """Time every variant in turns until each median's CI is within `tight_pct` or time runs out
    (`cuda`: the model runs on the GPU, so CUDA events; else the host clock)."""
    out = Samples({v.name: [] for v in variants}, {v.name: [] for v in variants})
    try:
        for v in variants:  # warm-up: first calls build kernels and the caching allocator's pools
            _select(variants, v)
            for _ in range(3):
                fn()
        start = time.monotonic()
        for r in range(max_rounds):
            for v in variants if r % 2 == 0 else variants[::-1]:
                _select(variants, v)
                gpu, host = _one(fn, cuda)
                out.gpu_us[v.name].append(gpu)
                out.host_us[v.name].append(host)
            if r + 1 >= min_rounds and (time.monotonic() - start > max_s or _tight(out.gpu_us, tight_pct)):
                break
    finally:  # the model leaves as it came, whatever happened
        _select(variants, Variant("eager", None))
    return out


def _tight(samples: dict[str, list[float]], pct: float) -> bool:
    return all(summarize(s).half_width_pct < pct for s in samples.values())


def handles(t: Target, bundle: Bundle, sets: dict[str, list[str]]) -> list[Variant]:
    """One removed handle per named set of groups (the eager variant first)."""
    out = [Variant("eager", None)]
    for name, groups in sets.items():
        h = bundle.apply(t.model, only=set(groups))
        h.remove()
        out.append(Variant(name, h))
    return out


def alone(t: Target, bundle: Bundle, groups: list[str], max_s: float) -> tuple[dict[str, Speedup], Samples]:
    """Each group patched alone against eager, all in one interleaved loop."""
    variants = handles(t, bundle, {g: [g] for g in groups})
    s = interleaved(forward(t), variants, max_s, cuda=on_gpu(t))
    return {g: speedup(s.gpu_us["eager"], s.gpu_us[g], name="eager") for g in groups}, s


def kept_alone(groups: list[str], in_model: dict[str, Speedup], faster_alone: set[str]) -> tuple[list[str], list[str]]:
    """(kept, dropped with why) by the rule in the module docstring."""
    keep, dropped = [], []
    for g in groups:
        sp = in_model[g]
        ok = sp.verdict == "faster" or (g in faster_alone and sp.value >= 1.0)
        if ok:
            keep.append(g)
            continue
        need = "not slower" if g in faster_alone else "faster with confidence (it was not faster alone)"
        dropped.append(f"{g}: loses in the model: the forward with it alone is {sp.value:.3f}x eager (CI "
                       f"{sp.ci_low:.3f}-{sp.ci_high:.3f}); it must be {need}")
    return keep, dropped


def never_slower(t: Target, bundle: Bundle, keep: list[str], gain: dict[str, float], max_s: float
                 ) -> tuple[list[str], Samples | None, list[str]]:
    """Unpatch the least useful group while the kept set's forward is slower than eager."""
    dropped: list[str] = []
    samples = None
    while keep:
        variants = handles(t, bundle, {"patched": keep})
        samples = interleaved(forward(t), variants, max_s, cuda=on_gpu(t))
        sp = speedup(samples.gpu_us["eager"], samples.gpu_us["patched"], name="eager")
        if sp.value >= 1.0:
            return keep, samples, dropped
        worst = min(keep, key=lambda g: gain.get(g, 0.0))
        keep = [g for g in keep if g != worst]
        dropped.append(f"{worst}: unpatched: the patched forward was {sp.value:.3f}x eager (CI {sp.ci_low:.3f}-"
                       f"{sp.ci_high:.3f}) and this group gained the least in the model")
    return keep, samples, dropped


def group_gpu_us(t: Target, bundle: Bundle, groups: list[str]) -> dict[str, float]:
    """Kernel time per patched group per forward (torch.profiler, `kiln.group.<id>` ranges)."""
    from kiln.evals.model.gputime import GROUP_RANGE, profile_forward

    with bundle.applied(t.model, only=set(groups)) as h:
        h.table.ranges = True
        fn = forward(t)
        fn()
        a = profile_forward(fn, reps=3, prefix=GROUP_RANGE)
    return {str(k): v for k, v in a.per_call_us.items()}
