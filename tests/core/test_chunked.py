"""Slice-by-slice reductions agree with the whole-tensor ones they replace (tiny slices here)."""

from __future__ import annotations

import pytest
import torch

from kiln.tools import chunked


@pytest.fixture(autouse=True)
def tiny_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chunked, "CHUNK", 7)


def _pair() -> tuple[torch.Tensor, torch.Tensor]:
    a = torch.randn(10, 13)
    a[3, 4] = float("nan")
    return a, a.clone()


def test_sum64_matches_a_float64_sum_with_nan_as_zero() -> None:
    a, _ = _pair()
    assert chunked.sum64(a) == pytest.approx(float(a.double().nan_to_num(0.0).sum()), rel=1e-12)
    assert chunked.sum64(torch.zeros(0)) == 0.0


def test_same_bits_sees_one_flipped_element_and_treats_nan_as_equal() -> None:
    a, b = _pair()
    assert chunked.same_bits(a, b)
    b[9, 12] = torch.nextafter(b[9, 12], torch.tensor(float("inf")))
    assert not chunked.same_bits(a, b)
    assert not chunked.same_bits(a, a.double())
    assert not chunked.same_bits(a, a[:5])
    assert chunked.same_bits(torch.zeros(0), torch.zeros(0))
    assert chunked.same_bits(a.t(), b.t().clone()) is False


def test_allclose_and_max_abs_diff_match_torch() -> None:
    a, b = _pair()
    b[0, 0] += 1e-3
    assert chunked.allclose(a, b, atol=1e-2, rtol=0) and not chunked.allclose(a, b, atol=1e-4, rtol=0)
    assert chunked.max_abs_diff(a, b) == pytest.approx(1e-3, rel=1e-3)
    b[1, 1] = float("nan")
    assert chunked.max_abs_diff(a, b) == float("inf")
    assert not chunked.allclose(a, b, atol=1, rtol=0)


def test_moved_uses_absolute_relative_and_slack_terms() -> None:
    a, b = _pair()
    b[5, 5] += 0.5
    assert chunked.moved(a, b, 1e-4, 0.0)
    assert not chunked.moved(a, b, 1e-4, 0.6)
    b[2, 2] = float("nan")
    assert chunked.moved(a, b, 1e-4, 10.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool, torch.uint8])
def test_digest_changes_when_any_element_does(dtype: torch.dtype) -> None:
    a = (torch.rand(9, 11) * 100).to(dtype)
    d = chunked.digest(a)
    assert chunked.digest(a.clone()) == d
    for i in (0, 50, 98):
        b = a.clone().reshape(-1)
        b[i] = 0 if bool(b[i] != 0) else 1
        assert chunked.digest(b.reshape(9, 11)) != d
    assert chunked.digest(torch.zeros(0, dtype=dtype)) == 0


def test_zero_dim_tensors_are_handled() -> None:
    """A problem may pass a 0-d tensor (a scalar) as an input: bit views need a flat tensor."""
    a = torch.tensor(2.5)
    assert chunked.same_bits(a, a.clone()) and not chunked.same_bits(a, torch.tensor(2.0))
    assert chunked.digest(a) != chunked.digest(torch.tensor(2.0))
    assert chunked.sum64(a) == 2.5 and chunked.allclose(a, a.clone(), atol=0, rtol=0)


def test_finite_stats_match_the_whole_tensor_figures() -> None:
    a = torch.randn(10, 13)
    a[0, 1], a[2, 3], a[4, 5], a[6, 7] = float("nan"), float("inf"), float("-inf"), float("-inf")
    st = chunked.finite_stats(a)
    finite = a[torch.isfinite(a)]
    assert (st["nan"], st["posinf"], st["neginf"]) == (1, 1, 2)
    assert st["sum_abs"] == pytest.approx(float(finite.double().abs().sum()), rel=1e-12)
    assert chunked.finite_stats(torch.arange(-3, 4))["sum_abs"] == 12.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_finite_stats_fast_and_exact_slices_agree_in_one_tensor(dtype: torch.dtype) -> None:
    """Slices with no NaN/inf take the one-reduction path, the others the element-by-element one; a
    value whose |x| sums past the dtype's range sends its slice to the exact path too."""
    a = torch.randn(50, generator=torch.Generator().manual_seed(1)).to(dtype)
    a[3], a[20], a[41] = float("nan"), float("inf"), float("-inf")
    st = chunked.finite_stats(a)
    finite = a[torch.isfinite(a)].double()
    assert (st["nan"], st["posinf"], st["neginf"]) == (1, 1, 1)
    assert st["sum_abs"] == pytest.approx(float(finite.abs().sum()), rel=1e-6)
    big = torch.full((7,), torch.finfo(torch.float16).max, dtype=torch.float16)  # sums to inf in float16
    assert chunked.finite_stats(big)["sum_abs"] == pytest.approx(7 * 65504.0)
    assert chunked.finite_stats(big)["posinf"] == 0
