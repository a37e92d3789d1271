"""On the GPU, at KernelBench's sizes: honest Triton reductions (tests/core/data/numerics) pass the
numerics rule under x1000 and x0.001 inputs, their multi-GB outputs compared on the sketch with the
numerics sampled at the same positions. Run on the H200: `pytest -m gpu tests/core/test_tolerance_gpu.py`."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import torch

from kiln.tools import numerics, sketch
from kiln.tools.correctness import pack
from kiln.tools.tolerance import judge

from .numerics_helpers import SEED, Reduce

DATA = Path(__file__).parent / "data" / "numerics"
pytestmark = pytest.mark.gpu


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"tol_gpu_{name}", DATA / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def verdict(model: torch.nn.Module, x: torch.Tensor, candidate) -> tuple:  # noqa: ANN001
    """(judgement, whether the output was sketched), the reference side as the reference worker does it."""
    num = numerics.build(model, "fp32")
    ref, why = numerics.reference_trial(model, num, (x,), (x,), seed=SEED)
    assert ref is not None and ref["numerics"]["status"] == "ok", why or ref["numerics"]
    with torch.no_grad():
        out = candidate(x)
    got = pack(out, SEED)
    del out
    torch.cuda.empty_cache()
    return judge(ref, got, dtype="fp32", atol=1e-4, rtol=1e-4), sketch.is_sketch(got["tensors"]["out"])


def rand(shape: tuple[int, ...], scale: float) -> torch.Tensor:
    gen = torch.Generator(device="cuda").manual_seed(11)
    return torch.rand(shape, generator=gen, device="cuda").mul_(scale)


@pytest.fixture(autouse=True)
def _gpu() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    yield
    torch.cuda.empty_cache()


@pytest.mark.parametrize("scale", [1000.0, 0.001])
def test_sum_over_a_middle_dim_16x4096x4095(scale: float) -> None:
    """KernelBench 47: 4096 terms per output, tiled in a different order from PyTorch's."""
    cand = load("sum_dim1_triton").ModelNew(1)
    j, _ = verdict(Reduce("sum", dim=1), rand((16, 4096, 4095), scale), cand)
    assert j.mismatch is None and j.rule == "numerics", j.mismatch.message if j.mismatch else ""


@pytest.mark.parametrize("scale", [1000.0, 0.001])
def test_layer_norm_16x64x256x256(scale: float) -> None:
    """KernelBench 40: statistics over 4 Mi elements per row; a 1 Gi-element output (sketched)."""
    k = load("kernels")
    shape = (64, 256, 256)
    gen = torch.Generator(device="cuda").manual_seed(3)
    w, b = torch.randn(shape, generator=gen, device="cuda"), torch.randn(shape, generator=gen, device="cuda")
    model = torch.nn.LayerNorm(shape).cuda()
    with torch.no_grad():
        model.weight.copy_(w)
        model.bias.copy_(b)
    x = rand((16, *shape), scale)
    j, sketched = verdict(model, x, lambda t: k.layer_norm(t.reshape(16, -1), w.reshape(-1), b.reshape(-1)).view_as(t))
    assert sketched and j.mismatch is None and j.rule == "numerics", j.mismatch.message if j.mismatch else ""


@pytest.mark.parametrize("scale", [1000.0, 0.001])
def test_softmax_4096x393216(scale: float) -> None:
    """KernelBench 23: rows of 393216 (an online softmax in 16384-wide blocks), 6 GB of output."""
    k = load("kernels")
    j, sketched = verdict(Reduce("softmax"), rand((4096, 393216), scale), k.softmax)
    assert sketched and j.mismatch is None and j.rule == "numerics", j.mismatch.message if j.mismatch else ""


def test_a_wrong_softmax_at_that_size_still_fails() -> None:
    """An unnormalised row (the denominator left out) in a sketched output."""
    k = load("kernels")

    def wrong(x: torch.Tensor) -> torch.Tensor:
        y = k.softmax(x)
        y[7].mul_(1.001)  # one row off by 0.1 %: every sampled element of it fails
        return y

    j, sketched = verdict(Reduce("softmax"), rand((4096, 393216), 1.0), wrong)
    assert sketched and j.mismatch is not None and j.mismatch.rule == "numerics"
