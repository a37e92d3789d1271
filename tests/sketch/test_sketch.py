"""Sketch comparison of huge outputs: boundary bugs and unwritten memory are always caught."""

from __future__ import annotations

import torch

from kiln.tools import sketch

N = {"n_uniform": 4096, "n_edge": 4096}


def test_same_tensor_same_sketch_positions() -> None:
    t = torch.randn(37, 1001)
    a, b = sketch.make_sketch(t, 7, **N), sketch.make_sketch(t.clone(), 7, **N)
    assert torch.equal(sketch.sketch_positions(a), sketch.sketch_positions(b)) and torch.equal(a["values"], b["values"])
    assert sketch.stats_mismatch(a, b, 1e-4) is None
    assert not torch.equal(sketch.sketch_positions(a), sketch.sketch_positions(sketch.make_sketch(t, 8, **N)))  # secret-seeded


def test_edge_samples_cover_every_boundary() -> None:
    shape = (5, 6, 7)
    pos = sketch.sketch_positions(sketch.make_sketch(torch.zeros(shape), 1, **N))[N["n_uniform"]:]
    coords = torch.tensor([sketch.unravel(int(p), list(shape)) for p in pos[:3000]])
    for d, s in enumerate(shape):
        assert (coords[:, d] == 0).any() and (coords[:, d] == s - 1).any()


def test_last_column_bug_is_in_the_sample() -> None:
    ref = torch.rand(64, 4097)
    bad = ref.clone()
    bad[:, -1] = 0.0  # off-by-one mask: last column never written (here: zero)
    e, a = sketch.make_sketch(ref, 3, **N), sketch.make_sketch(bad, 3, **N)
    diff = (e["values"] - a["values"]).abs() > 1e-4
    assert diff.any()
    flat = int(sketch.sketch_positions(e)[diff.nonzero()[0, 0]])
    assert sketch.unravel(flat, [64, 4097])[1] == 4096


def test_unwritten_nan_anywhere_shows_in_stats() -> None:
    ref = torch.rand(300, 301)
    bad = ref.clone()
    bad[123, 45] = float("nan")
    msg = sketch.stats_mismatch(sketch.make_sketch(ref, 0, **N), sketch.make_sketch(bad, 0, **N), 1e-4)
    assert msg and "NaN" in msg


def test_gross_error_outside_sample_moves_sum() -> None:
    ref = torch.rand(200, 200)
    bad = ref.clone()
    bad[:20] *= 2.0
    assert "sum of |output|" in sketch.stats_mismatch(sketch.make_sketch(ref, 0, **N), sketch.make_sketch(bad, 0, **N), 1e-4)
