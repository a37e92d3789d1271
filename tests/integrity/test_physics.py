"""Bytes and FLOPs that must move, the floor arithmetic, and the peaks cache on CPU."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from kiln.tools.integrity.physics import BW_MARGIN, COMPUTE_MARGIN, count_work, floor
from kiln.tools.peaks import Peaks


def test_linear_reads_inputs_and_weights_once_and_writes_the_output() -> None:
    m = nn.Linear(64, 32)
    x = torch.randn(128, 64)
    nbytes, flops = count_work(m, (x,))
    assert nbytes == 4 * (128 * 64 + 64 * 32 + 32 + 128 * 32)
    assert flops == 2 * 128 * 64 * 32


def test_only_the_read_part_of_an_input_counts() -> None:
    class Slice(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[:, :10].sum(1)

    nbytes, flops = count_work(Slice(), (torch.randn(100, 100),))
    assert nbytes == 4 * (100 * 10 + 100)
    assert flops is None  # elementwise / reductions are not counted by the flop counter


def test_unused_parameters_do_not_count() -> None:
    class Unused(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.big = nn.Parameter(torch.randn(1000, 1000))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2

    assert count_work(Unused(), (torch.randn(10),))[0] == 4 * 20


def test_floor_takes_the_larger_of_memory_and_compute_time() -> None:
    p = {"gbps": 4000.0, "tflops": 500.0}
    mem = floor(4_000_000_000, 10**9, **p, measured_us=1000.0)
    assert mem.bound == "memory"
    assert mem.floor_us == pytest.approx(4e9 / (4000e9 * BW_MARGIN) * 1e6)
    assert mem.pct_of_floor == pytest.approx(100 * mem.floor_us / 1000.0)
    cmp = floor(1000, 10**15, **p)
    assert cmp.bound == "compute"
    assert cmp.floor_us == pytest.approx(1e15 / (500e12 * COMPUTE_MARGIN) * 1e6)


def test_floor_without_peaks_is_empty() -> None:
    rec = floor(1000, None, gbps=None, tflops=None)
    assert rec.floor_us is None and rec.bound is None


def test_the_floor_uses_the_fastest_rate_a_dtype_may_legitimately_use() -> None:
    p = Peaks(copy_gbps=4000.0, matmul_tflops={"fp32": 50.0, "tf32": 400.0, "bf16": 760.0, "fp16": 730.0})
    assert p.floor_tflops("fp32") == 760.0  # a bf16 tensor-core kernel for an fp32 problem is a tolerance question
    assert p.floor_tflops("fp16") == 760.0 and p.floor_tflops("bf16") == 760.0
    assert Peaks().floor_tflops("fp32") is None


def test_peaks_cache_round_trip(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    from kiln.tools import peaks as kp

    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(kp, "identity", lambda _i: "NVIDIA H200|GPU-x|torch2")
    assert kp.cached(0) is None
    rec = Peaks(gpu_name="H200", copy_gbps=4100.0, matmul_tflops={"bf16": 700.0}, source="measured")
    kp.store(0, rec)
    got = kp.cached(0)
    assert got is not None and got.copy_gbps == 4100.0 and got.source.startswith("cache:")
    (tmp_path / "peaks.json").write_text("not json")
    assert kp.cached(0) is None
