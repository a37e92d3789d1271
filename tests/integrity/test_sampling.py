"""Every position sampler is exact at any size (issue 22, part 7): the degeneracy digest's evenly
spread positions (`degenerate.spread`) and the sketch's secret-seeded ones (`sketch.positions`, which
the sketch comparison, the numerics rule, output hygiene and the timing re-check all draw through).
Sizes: 32,768,000 (8192x4000, where float32 `torch.linspace` rounded its last index up to numel),
2^31 - 1, and a 2-D shape past 2^31. Only positions are built, never a tensor of that size, except
one 64 MB fp16 output for the digest itself."""

from __future__ import annotations

import math

import pytest
import torch

from kiln.tools import sketch
from kiln.tools.integrity.degenerate import DIGEST_N, digest, spread

SIZES = [32_768_000, (1 << 31) - 1, 1 << 31, (1 << 40) + 7]
SHAPES = [(8192, 4000), ((1 << 31) - 1,), (65537, 32768), (3, 1 << 30)]


@pytest.mark.parametrize("numel", SIZES)
def test_spread_positions_are_in_range_and_even(numel: int) -> None:
    idx = spread(numel, DIGEST_N)
    assert idx.dtype == torch.long and idx.numel() == DIGEST_N
    assert int(idx[0]) == 0 and int(idx[-1]) == numel - 1
    gaps = idx.diff()
    step = (numel - 1) // (DIGEST_N - 1)
    assert int(gaps.min()) >= step and int(gaps.max()) <= step + 1  # evenly spread, strictly increasing


def test_float32_linspace_was_the_bug() -> None:
    """The old sampler, kept here to show the size is a real trap (not a test of torch)."""
    assert int(torch.linspace(0, 32_767_999, DIGEST_N).long()[-1]) == 32_768_000
    assert int(spread(32_768_000, DIGEST_N)[-1]) == 32_767_999


@pytest.mark.parametrize(("numel", "n"), [(0, 8), (1, 8), (5, 8), (8, 8), (9, 8), (1000, 1)])
def test_spread_small_sizes(numel: int, n: int) -> None:
    idx = spread(numel, n).tolist()
    assert len(idx) == min(n, numel) and idx == sorted(set(idx)) and all(0 <= i < numel for i in idx)
    if numel <= n:
        assert idx == list(range(numel))


def test_digest_of_an_8192x4000_output_keeps_its_last_element() -> None:
    t = torch.zeros(8192, 4000, dtype=torch.float16)  # 64 MB
    t[0, 0], t[-1, -1] = 3.0, 7.0
    packed = {"meta": [{"name": "out", "kind": "tensor"}], "tensors": {"out": t}}
    d = digest(packed)["out"]
    assert d["values"].numel() == DIGEST_N and float(d["values"][0]) == 3.0 and float(d["values"][-1]) == 7.0
    assert d["max_abs"] == 7.0


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_sketch_positions_are_in_range_at_any_size(shape: tuple[int, ...]) -> None:
    numel = math.prod(shape)
    pos = sketch.positions(shape, 99, 4096, 4096)
    assert pos.dtype == torch.long and pos.numel() == 8192
    assert int(pos.min()) >= 0 and int(pos.max()) < numel
    edge = [sketch.unravel(int(p), list(shape)) for p in pos[4096:]]
    for d, s in enumerate(shape):  # every boundary of every dimension is pinned, the last one exactly
        assert any(c[d] == s - 1 for c in edge) and any(c[d] == 0 for c in edge)
    if len(shape) == 1:
        assert int(pos[4096:].max()) == numel - 1


def test_sketch_uniform_positions_reach_the_top_of_a_2_pow_31_range() -> None:
    """Uniform draws are integers (no float rounding): a third of them lie in the top third."""
    numel = (1 << 31) - 1
    pos = sketch.positions((numel,), 5, 3000, 0)
    assert int((pos >= 2 * numel // 3).sum()) > 800 and int(pos.max()) < numel



def test_a_sketch_names_the_device_its_positions_were_drawn_on() -> None:
    """Positions are drawn on the output's device (microseconds on a GPU, where the CPU's draw of
    4 Mi positions took 0.1-0.5 s a trial); the sketch says which, so the positions it reports a
    mismatch at are the ones it sampled."""
    t = torch.arange(70_000, dtype=torch.float32)
    sk = sketch.make_sketch(t, 3, n_uniform=500, n_edge=20)
    assert sk["device"] == "cpu"
    pos = sketch.sketch_positions(sk)
    assert pos.device.type == "cpu" and torch.equal(t[pos], sk["values"])


@pytest.mark.gpu
def test_two_processes_draw_the_same_positions_on_the_gpu() -> None:
    """The candidate's and the reference's workers sample one output in two processes: a CUDA
    generator with one seed gives both the same positions."""
    import subprocess
    import sys

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    code = ("import hashlib, torch; from kiln.tools import sketch; "
            "p = sketch.positions_on('cuda', (8192, 4000), 12345); "
            "print(hashlib.sha256(p.cpu().numpy().tobytes()).hexdigest())")
    out = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          timeout=300).stdout.strip() for _ in range(2)}
    assert len(out) == 1, out
    p = sketch.positions_on("cuda", (8192, 4000), 12345)
    assert int(p.min()) >= 0 and int(p.max()) < 8192 * 4000
