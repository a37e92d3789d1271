"""Parse: the torch profiler's Chrome trace (CUPTI activity records) into per-kernel entries (pure)."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from kiln.tools.errors import KilnInputError
from kiln.tools.profile.records import KernelProfile


def kernel_events(trace: dict[str, Any] | list[Any]) -> list[dict[str, Any]]:
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    return [e for e in events if isinstance(e, dict) and e.get("cat") == "kernel" and e.get("ph") == "X"]


def parse_trace(text: str, *, reps: int = 1) -> list[KernelProfile]:
    """One entry per kernel name: duration per launch (mean), launches per forward, launch geometry,
    and what CUPTI knows of registers, shared memory and estimated occupancy."""
    try:
        trace = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KilnInputError(f"not a torch profiler trace (JSON error: {exc.msg})") from exc
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for ev in kernel_events(trace):
        groups[ev["name"]].append(ev)
    return [_kernel(name, evs, reps) for name, evs in groups.items()]


def _kernel(name: str, evs: list[dict[str, Any]], reps: int) -> KernelProfile:
    first = evs[0].get("args", {})
    durs = [float(e.get("dur", 0.0)) for e in evs]
    smem = first.get("shared memory")
    occ = first.get("est. achieved occupancy %")
    return KernelProfile(
        name=name, source="torch_profiler", launches=max(1, round(len(evs) / max(reps, 1))),
        duration_us=sum(durs) / len(durs), grid=_dims(first.get("grid")), block=_dims(first.get("block")),
        registers_per_thread=_opt_int(first.get("registers per thread")),
        shared_mem_bytes=_opt_int(smem),
        theoretical_occupancy_pct=float(occ) if occ else None,  # CUPTI computes it (0: unknown), not measured
    )


def _dims(v: Any) -> list[int] | None:
    return [int(x) for x in v] if isinstance(v, (list, tuple)) else None


def _opt_int(v: Any) -> int | None:
    try:
        return int(v) if v is not None else None
    except (TypeError, ValueError):
        return None
