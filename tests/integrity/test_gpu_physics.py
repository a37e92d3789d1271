"""On the GPU: a real, fast Triton copy and softmax on large sizes (near the measured bandwidth)
are NOT rejected by the physics floor, and a copy hidden on a side stream (which the event timer
does not see) IS. Run on the H200: `pytest -m gpu tests/integrity/test_gpu_physics.py -s`."""

from __future__ import annotations

import pytest
import torch

from kiln.tools import peaks as kp
from kiln.tools.integrity import physics, verdict
from kiln.tools.records import CheckRecord, IntegrityRecord, PhysicsRecord, TimingRecord, TimingStat

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

N_COPY = 1 << 28           # 256 Mi floats = 1 GiB in, 1 GiB out
ROWS, COLS = 65536, 4096   # 1 GiB softmax input


def _kernels():  # noqa: ANN202 - Triton kernels built lazily (no triton import at collection)
    import triton
    import triton.language as tl

    @triton.jit
    def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)

    @triton.jit
    def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(y_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)

    return triton, copy_kernel, softmax_kernel


def _median_us(fn, reps: int = 30) -> float:  # noqa: ANN001
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    return sorted(times)[len(times) // 2]


def _judge(ref: torch.nn.Module, x: torch.Tensor, measured_us: float, tmp_path) -> CheckRecord:  # noqa: ANN001
    nbytes, flops = physics.count_work(ref, (x,))
    peaks = kp.measure()
    stat = TimingStat(median_us=measured_us, ci_low_us=measured_us, ci_high_us=measured_us, half_width_pct=0.0, n_samples=30)
    rec = CheckRecord(problem="p", candidate="c", device="cuda", status="ok", correct=True,
                      timing=TimingRecord(measured=True, candidate=stat),
                      integrity=IntegrityRecord(physics=PhysicsRecord(bytes_moved=nbytes, flops=flops)))
    out = verdict.apply(rec, peaks=peaks)
    ph = out.integrity.physics  # type: ignore[union-attr]
    print(f"\n{type(ref).__name__}: {measured_us:.1f} us, floor {ph.floor_us:.1f} us, {ph.pct_of_floor:.0f}% of floor, "
          f"{nbytes / measured_us / 1e3:.0f} GB/s vs measured copy peak {peaks.copy_gbps:.0f} GB/s")
    return out


class Copy(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.clone()


class Softmax(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def test_fast_triton_copy_is_not_rejected(tmp_path) -> None:  # noqa: ANN001
    triton, copy_kernel, _ = _kernels()
    x = torch.randn(N_COPY, device="cuda")
    y = torch.empty_like(x)
    us = _median_us(lambda: copy_kernel[(triton.cdiv(N_COPY, 4096),)](x, y, N_COPY, BLOCK=4096))
    torch.testing.assert_close(y, x)
    out = _judge(Copy(), x, us, tmp_path)
    assert out.status == "ok", out.reasons
    assert out.integrity.physics.pct_of_floor > 50  # type: ignore[union-attr]  # it really is near the roofline


def test_fast_triton_softmax_is_not_rejected(tmp_path) -> None:  # noqa: ANN001
    triton, _, softmax_kernel = _kernels()
    x = torch.randn(ROWS, COLS, device="cuda")
    y = torch.empty_like(x)
    us = _median_us(lambda: softmax_kernel[(ROWS,)](x, y, COLS, BLOCK=COLS, num_warps=16))
    torch.testing.assert_close(y, torch.softmax(x, 1))
    out = _judge(Softmax(), x, us, tmp_path)
    assert out.status == "ok", out.reasons


def test_copy_hidden_on_a_side_stream_is_faster_than_the_hardware(tmp_path) -> None:  # noqa: ANN001
    x = torch.randn(N_COPY, device="cuda")
    y = torch.empty_like(x)
    side = torch.cuda.Stream()

    def cheat() -> None:
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            y.copy_(x)

    us = _median_us(cheat)
    torch.cuda.synchronize()
    out = _judge(Copy(), x, us, tmp_path)
    assert out.status == "rejected"
    assert out.reasons[0].startswith("rejected: faster than the hardware allows")
