"""The mismatch report's one-line hint is true: a constant ratio is claimed only where the expected
values vary enough to show one (the transcripts' additive logsumexp error read as "a constant 1.164")."""

from __future__ import annotations

import torch

from kiln.tools.correctness import compare_tensors

TOL = {"atol": 1e-4, "rtol": 1e-4}


def message(expected: torch.Tensor, actual: torch.Tensor) -> str:
    mm = compare_tensors(expected, actual, **TOL)
    assert mm is not None
    return mm.message


def test_the_transcripts_additive_error_is_not_called_a_scale_factor():
    """45_Gemm_Sigmoid_LogSumExp: expected ~4.163 on every row, actual = expected + 0.683 (63 padded
    lanes of exp(0) added inside the log)."""
    g = torch.Generator().manual_seed(0)
    expected = 4.163 + 0.002 * torch.rand(33, generator=g)
    actual = torch.log(torch.exp(expected) + 63.0)
    text = message(expected, actual)
    assert "scale factor look alike" in text and "actual/expected is a constant" not in text
    assert "+0.68" in text


def test_a_real_scale_factor_on_varied_values_is_named():
    expected = torch.linspace(-3.0, 5.0, 200)
    text = message(expected, 1.5 * expected)
    assert "actual/expected is a constant 1.5: a missing or extra scale factor" in text


def test_an_added_term_on_varied_values_is_named():
    expected = torch.linspace(0.5, 5.0, 200)
    text = message(expected, expected + 0.25)
    assert "actual - expected is a near-constant +0.25: an extra or missing added term" in text
    assert "scale factor." not in text
