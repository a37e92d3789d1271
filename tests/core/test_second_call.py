"""The candidate's second call (after the reference) is compared with its first on the device,
bitwise; a buffer returned twice is compared through the first call's saved copy instead."""

from __future__ import annotations

import torch

from kiln.tools.check.candidate import _storages, same_output


def test_bitwise_same_results() -> None:
    a = torch.randn(3, 4)
    assert same_output(a, a.clone())
    assert not same_output(a, a + 1e-7)
    nan = torch.full((2,), float("nan"))
    assert same_output(nan, nan.clone())  # NaN equals NaN bitwise
    assert same_output((a, 2, None), (a.clone(), 2, None))
    assert not same_output((a,), [a.clone()])  # tuple vs list
    assert not same_output((a, 2), (a.clone(), 3))
    assert not same_output(a, a.to(torch.float64))
    assert not same_output({"x": a}, {"x": a})  # unknown kinds are never called the same


def test_a_buffer_returned_twice_is_detected() -> None:
    buf = torch.zeros(4)
    other = torch.zeros(4)
    assert _storages(buf) & _storages((buf[1:], 3))  # a view of the same storage counts
    assert not _storages(buf) & _storages(other)
    assert _storages(torch.empty(0)) == set()
