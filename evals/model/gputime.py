"""GPU time per recorded call, from `torch.profiler` (collect, then a pure parse).

Each recorded call runs inside a `record_function("kiln.call.<index>")` range. A kernel (or memcpy,
memset) belongs to the CPU op that launched it (torch.profiler links them by correlation id and
lists it in that op's `kernels`); the op belongs to the nearest enclosing `kiln.call.*` range.

What is *not* counted, because it is not device work: the ranges' own device-side annotations
(`gpu_user_annotation` spans, which also cover the gaps between a call's kernels; counting them
double-counted a cuDNN convolution at 153.8% of the forward). So every call's time is a sum of its
kernels' durations, the forward's total is the sum over all kernels, and the shares of a forward's
calls add up to at most 100% (the rest ran outside any recorded call).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

RANGE = "kiln.call."
GROUP_RANGE = "kiln.group."
RANGES = (RANGE, GROUP_RANGE)


@dataclass
class Attribution:
    per_call_us: dict
    """Kernel us per range: call index (kiln.call.<i>) or group id (kiln.group.<id>)."""
    total_us: float = 0.0
    """All kernel time launched by any CPU op in the forward (the shares' denominator)."""
    outside_us: float = 0.0
    """Kernel time launched outside every recorded call (module hooks, Python glue)."""


def _range_of(ev: Any, prefix: str) -> str | None:
    """The name (after `prefix`) of the nearest enclosing range of a CPU event, or None."""
    node = ev
    while node is not None:
        name = getattr(node, "name", "") or ""
        if name.startswith(prefix):
            return name[len(prefix):]
        node = getattr(node, "cpu_parent", None)
    return None


def _is_cpu(ev: Any) -> bool:
    return getattr(getattr(ev, "device_type", None), "name", "") == "CPU"


def _is_device(ev: Any) -> bool:
    return getattr(getattr(ev, "device_type", None), "name", "") in ("CUDA", "PrivateUse1", "XPU")


def _own_kernel_us(ev: Any) -> float:
    """Durations of the device work this CPU event launched itself (annotations left out)."""
    return sum(float(k.duration) for k in getattr(ev, "kernels", ()) if not str(k.name).startswith(RANGES))


def _span(ev: Any) -> tuple[float, float]:
    tr = ev.time_range
    return float(tr.start), float(tr.end)


def attribute(events: Iterable[Any], prefix: str = RANGE) -> Attribution:
    """Per-range and total kernel time of one profiled forward (pure: any FunctionEvent-like list).
    Ranges are `<prefix><name>`; with the default prefix the names are call indices.

    A kernel reaches this list in one of three ways, and each is counted once:
    - among the kernels of the CPU op that launched it (an aten op's own launch);
    - among the kernels of a range itself: torch links a kernel to the innermost op or range open
      when it was launched, and a Triton kernel launches from Python, outside every aten op;
    - on its own, linked to no CPU event (launched with nothing open, e.g. a bare Triton call):
      it belongs to the range whose device-side annotation span holds its start, if any.
    The ranges' own annotations (a span, gaps included) are never device work."""
    events = list(events)
    per: defaultdict[int | str, float] = defaultdict(float)
    total = outside = 0.0

    def add(name: str | None, us: float) -> None:
        nonlocal total, outside
        total += us
        if name is None:
            outside += us
        else:
            per[int(name) if prefix == RANGE and name.isdigit() else name] += us

    linked = {ev.id for ev in events if _is_cpu(ev) and not getattr(ev, "is_async", False)}
    spans = [(*_span(ev), str(ev.name)[len(prefix):]) for ev in events
             if _is_device(ev) and str(ev.name).startswith(prefix)]
    for ev in events:
        if _is_device(ev):
            corr = getattr(ev, "linked_correlation_id", 0)
            if str(ev.name).startswith(RANGES) or getattr(ev, "is_user_annotation", False) or (corr and corr in linked):
                continue  # an annotation, or already among a CPU event's kernels
            start, end = _span(ev)
            if end > start:
                add(next((n for lo, hi, n in spans if lo <= start < hi), None), end - start)
            continue
        if not _is_cpu(ev):
            continue
        us = _own_kernel_us(ev)
        if us > 0:
            add(_range_of(ev, prefix), us)  # a range's own kernels are its own
    return Attribution(per_call_us=dict(per), total_us=total, outside_us=outside)


def profile_forward(run: Callable[[], Any], reps: int = 3, prefix: str = RANGE) -> Attribution:
    """Run `run()` (a forward whose calls open `<prefix>*` ranges) `reps` times under torch.profiler;
    the per-forward average of each range's kernel time."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    per: defaultdict[int | str, float] = defaultdict(float)
    total = outside = 0.0
    for _ in range(reps):
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            run()
            torch.cuda.synchronize()
        a = attribute(prof.events(), prefix)
        for k, v in a.per_call_us.items():
            per[k] += v
        total += a.total_us
        outside += a.outside_us
    return Attribution({k: v / reps for k, v in per.items()}, total / reps, outside / reps)
