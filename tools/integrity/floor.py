"""The physics floor's arithmetic: the fastest time a GPU's measured peaks allow for a problem's
bytes and FLOPs (`kiln.tools.integrity.physics.count_work` counts them in the reference's process).
No torch here: kiln's own process applies the floor in the verdict, and a fresh `kiln check` on the
resident fork server reaches its verdict without ever importing torch."""

from __future__ import annotations

from kiln.tools.records import PhysicsRecord

BW_MARGIN = 1.25
"""Allowed bandwidth above the measured 1 GiB copy rate (read-heavy kernels reach ~5-10% more)."""
COMPUTE_MARGIN = 1.25
"""Allowed matmul throughput above the measured large-matmul rate (clock boost, better tiling)."""


def floor(bytes_moved: int | None, flops: int | None, *, gbps: float | None, tflops: float | None,
          source: str | None = None, measured_us: float | None = None) -> PhysicsRecord:
    """The fastest time this GPU allows for the work (at `gbps` copy bandwidth and `tflops`, the
    fastest rate usable for the problem's dtype: `Peaks.floor_tflops`), against the measured time."""
    rec = PhysicsRecord(bytes_moved=bytes_moved, flops=flops, peak_gbps=gbps, peak_tflops=tflops,
                        measured_us=measured_us, peak_source=source)
    mem_us = bytes_moved / (gbps * BW_MARGIN * 1e3) if bytes_moved and gbps else None
    cmp_us = flops / (tflops * COMPUTE_MARGIN * 1e6) if flops and tflops else None
    terms = {k: v for k, v in {"memory": mem_us, "compute": cmp_us}.items() if v is not None}
    if not terms:
        return rec
    bound = max(terms, key=lambda k: terms[k])
    rec.floor_us, rec.bound = terms[bound], bound
    if measured_us:
        rec.pct_of_floor = 100.0 * rec.floor_us / measured_us
    return rec
