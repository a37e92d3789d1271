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


def _own_kernel_us(ev: Any) -> float:
    """Durations of the device work this CPU event launched itself (annotations left out)."""
    return sum(float(k.duration) for k in getattr(ev, "kernels", ()) if not str(k.name).startswith(RANGES))


def attribute(events: Iterable[Any], prefix: str = RANGE) -> Attribution:
    """Per-range and total kernel time of one profiled forward (pure: any FunctionEvent-like list).
    Ranges are `<prefix><name>`; with the default prefix the names are call indices."""
    per: defaultdict[int | str, float] = defaultdict(float)
    total = outside = 0.0
    for ev in events:
        if not _is_cpu(ev) or str(ev.name).startswith(RANGES):  # a range launches nothing itself
            continue
        us = _own_kernel_us(ev)
        if us <= 0:
            continue
        total += us
        name = _range_of(ev, prefix)
        if name is None:
            outside += us
        else:
            per[int(name) if prefix == RANGE and name.isdigit() else name] += us
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
