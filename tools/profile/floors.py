"""Two floors for one problem's work (issue 25 item 11): the I/O floor (moving its inputs, weights and
outputs once at the copy bandwidth: no algorithm beats it) and the algorithm floor (the reference
algorithm's FLOPs at a compute peak: an algebraic simplification that does less work can). When
the second is far above the first, a kernel at "90% of its roofline" may still be many times slower
than a kernel that does less arithmetic (folding a sum into a GEMM was worth about 30x on level2/18).

Pure functions, with the physics floor's margins (`kiln.tools.integrity.physics`), so the numbers
agree with the check's own floor."""

from __future__ import annotations

from pydantic import Field

from kiln.tools.records import Record

DIFFER_X = 2.0
"""The algorithm floor this many times the I/O floor or more: worth telling the Judge and the Coder."""


class Floors(Record):
    """The I/O floor and the algorithm floor of one problem on one GPU, in microseconds."""

    io_bytes: int | None = Field(None, description="inputs and parameters read once plus outputs written once")
    flops: int | None = Field(None, description="the reference algorithm's FLOPs (torch's flop counter)")
    peak_gbps: float | None = None
    peak_tflops: float | None = Field(None, description="the compute peak the algorithm floor is taken at")
    io_floor_us: float | None = None
    algorithm_floor_us: float | None = None

    @property
    def ratio(self) -> float | None:
        """Algorithm floor / I/O floor (None when either is unknown)."""
        if not self.io_floor_us or not self.algorithm_floor_us:
            return None
        return self.algorithm_floor_us / self.io_floor_us

    @property
    def differ(self) -> bool:
        return (self.ratio or 0.0) >= DIFFER_X


def floors(io_bytes: int | None, flops: int | None, *, gbps: float | None, tflops: float | None) -> Floors:
    from kiln.tools.integrity.floor import BW_MARGIN, COMPUTE_MARGIN

    io_us = io_bytes / (gbps * BW_MARGIN * 1e3) if io_bytes and gbps else None
    alg_us = flops / (tflops * COMPUTE_MARGIN * 1e6) if flops and tflops else None
    return Floors(io_bytes=io_bytes, flops=flops, peak_gbps=gbps, peak_tflops=tflops, io_floor_us=io_us,
                  algorithm_floor_us=alg_us)


def floor_lines(f: Floors) -> list[str]:
    """The two floors for a digest or a prompt, and the warning when they differ a lot."""
    out = []
    if f.io_floor_us is not None:
        out.append(f"I/O floor {f.io_floor_us:.2f} us: {f.io_bytes} bytes moved once at {f.peak_gbps:.0f} GB/s "
                   "(no algorithm beats it)")
    if f.algorithm_floor_us is not None:
        out.append(f"algorithm floor {f.algorithm_floor_us:.2f} us: the reference's {f.flops} FLOPs at "
                   f"{f.peak_tflops:.0f} TFLOP/s")
    if f.differ:
        out.append(f"the algorithm floor is {f.ratio:.0f}x the I/O floor: a kernel near the algorithm's roofline can "
                   "still be far from the fastest; look for an algebraic simplification that does less work than "
                   "the reference (fold a reduction into a GEMM, drop work the output does not depend on) before "
                   "stopping at the roofline")
    return out
