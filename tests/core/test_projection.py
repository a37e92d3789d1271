"""The timing audit's keyed projections (kiln.tools.timing.audit): the fast path against the formula."""

from __future__ import annotations

import math

import pytest
import torch

from kiln.tools.timing import audit


def _formula(x: torch.Tensor, key: int, leaf: int, sigma: float) -> list[float]:
    """P_k = sum_i u_k(i) g(x_i) in float64, straight from the definition (non-finite x_i count 0)."""
    flat = x.reshape(-1).double()
    n = flat.numel()
    width = min(audit.WIDTH, n)
    rows = n // width
    w, phi = audit._wave(key, leaf)
    scale = w / sigma
    g = torch.where(torch.isfinite(flat), torch.sin(flat * scale + phi) - math.sin(phi), 0.0)
    cols, row, tail_signs = (t.double() for t in audit.sign_table(key, leaf, width, rows, n - rows * width))
    out = []
    for k in range(audit.K):
        body = (g[:rows * width].view(rows, width) * row[:, k, None] * cols[None, :, k]).sum()
        tail = g[rows * width:]
        if tail.numel():
            body += (tail * tail_signs[:, k]).sum()
        out.append(float(body))
    return out


@pytest.mark.parametrize(("shape", "dtype", "poison"), [
    ((2048, 1024), torch.float32, None),
    ((3000, 1031), torch.float32, None),  # a tail past the last full row
    ((40000, 1024), torch.float32, "nan"),  # two blocks of rows: one takes the exact path
    ((1500, 1024), torch.bfloat16, "inf"),
    ((7,), torch.float32, "-inf"),
])
def test_projections_match_the_formula_and_count_non_finite(shape: tuple[int, ...], dtype: torch.dtype,
                                                            poison: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audit, "ROWS_PER_CHUNK", 1 << 14)  # blocks of 16 Mi elements: the 40000-row case takes two
    x = torch.randn(shape, generator=torch.Generator().manual_seed(3)).to(dtype)
    if poison:
        x.view(-1)[-2] = float(poison)
    got = audit._project_tensor(x, key=77, leaf=1, sigma=0.8)
    want = _formula(x, 77, 1, 0.8)
    spread = math.sqrt(x.numel())  # the sums are random walks of about this size
    assert max(abs(a - b) for a, b in zip(got["p"], want, strict=True)) < 1e-4 * spread
    assert (got["nan"], got["posinf"], got["neginf"]) == (int(poison == "nan"), int(poison == "inf"),
                                                          int(poison == "-inf"))


def test_sign_patterns_are_balanced_independent_and_keyed() -> None:
    cols, rows, tail = audit.sign_table(key=1, leaf=0, width=1024, rows=4096, tail=5)
    assert cols.shape == (1024, audit.K) and rows.shape == (4096, audit.K) and tail.shape == (5, audit.K)
    assert set(rows.unique().tolist()) == {-1.0, 1.0}
    assert rows.mean().abs() < 0.05 and (rows.T @ rows / 4096 - torch.eye(audit.K)).abs().max() < 0.1
    again, other = (audit.sign_table(key=k, leaf=0, width=1024, rows=4096, tail=5)[1] for k in (1, 2))
    assert torch.equal(again, rows) and not torch.equal(other, rows)


def test_a_changed_element_moves_the_projection() -> None:
    x = torch.randn(4096, 1024, generator=torch.Generator().manual_seed(5))
    y = x.clone()
    y[1000, 7] += 1.0
    a, b = (audit._project_tensor(t, key=9, leaf=0, sigma=1.0)["p"] for t in (x, y))
    assert sum((p - q) ** 2 for p, q in zip(a, b, strict=True)) / audit.K > 0.05


def test_a_laps_outputs_projected_together_match_each_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """`project_many` (a lap's commit) stacks small same-shape leaves across slots: the numbers are
    `project`'s for each output, a NaN slot counted exactly, other leaves as they were; stacks of a
    bounded size (3 here) cover every slot."""
    monkeypatch.setattr(audit, "BATCH_ELEMS", 3 * 3000)
    gen = torch.Generator().manual_seed(11)
    outputs = []
    for j in range(8):
        a = torch.randn(3, 1000, generator=gen)  # two rows of 1024 and a tail of 952
        b = torch.randn(2051, generator=gen).to(torch.bfloat16)  # two rows of 1024 and a tail of 3
        if j == 5:
            a.view(-1)[17] = float("nan")
            b[-1] = float("inf")
        outputs.append((a, [b, torch.arange(j, j + 4)], 2.5))
    outputs.append((torch.randn(5, 7, generator=gen), [torch.randn(2051).to(torch.bfloat16), torch.arange(4)], 1.0))
    sigma = [0.9, 1.3, 1.0, 1.0]
    many = audit.project_many(outputs, key=123, sigma=sigma)
    assert len(many) == len(outputs)
    for got, out in zip(many, outputs, strict=True):
        want = audit.project(out, 123, sigma)
        assert [g["kind"] for g in got] == [w["kind"] for w in want] == ["tensor", "tensor", "exact", "number"]
        for g, w in zip(got, want, strict=True):
            if g["kind"] != "tensor":
                assert g == w
                continue
            assert {k: g[k] for k in ("n", "dtype", "shape", "nan", "posinf", "neginf")} == \
                {k: w[k] for k in ("n", "dtype", "shape", "nan", "posinf", "neginf")}
            assert max(abs(x - y) for x, y in zip(g["p"], w["p"], strict=True)) < 1e-4 * math.sqrt(g["n"])
    assert (many[5][0]["nan"], many[5][1]["posinf"]) == (1, 1)
