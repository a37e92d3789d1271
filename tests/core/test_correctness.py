"""The comparison rules and the mismatch report a Coder reads."""

from __future__ import annotations

import torch

from kiln.tools.correctness import compare, pack, tolerances


def cmp(expected, actual, atol=1e-4, rtol=1e-4):
    return compare(pack(expected), pack(actual), atol=atol, rtol=rtol)


def test_within_tolerance_passes_and_nan_where_reference_has_nan() -> None:
    e = torch.tensor([1.0, float("nan"), 3.0])
    assert cmp(e, e + 5e-5) is None
    assert cmp(e, torch.tensor([1.0, 2.0, 3.0])) is not None  # reference NaN, candidate a number


def test_new_nan_is_reported_with_index_and_hint() -> None:
    e = torch.arange(12.0).reshape(3, 4)
    a = e.clone()
    a[:, 3] = float("nan")  # last column unwritten
    mm = cmp(e, a)
    assert mm is not None and mm.reason == "nan" and mm.n_mismatch == 3 and mm.n_total == 12
    assert mm.first[0].index == [0, 3] and mm.first[0].expected == 3.0
    assert mm.max_abs_err == float("inf")
    assert "unwritten" in mm.message and "[0, 3]: expected 3, got nan" in mm.message


def test_values_report_counts_errors_and_spots_a_scale() -> None:
    e = torch.rand(50, 7) + 0.5
    mm = cmp(e, e * 0.5)
    assert mm is not None and mm.reason == "values" and mm.n_mismatch == 350 and mm.mismatch_frac == 1.0
    assert abs(mm.max_rel_err - 0.5) < 1e-6
    assert "constant 0.5" in mm.message


def test_boundary_hint() -> None:
    e = torch.rand(8, 33)
    a = e.clone()
    a[:, -1] = 0.0
    mm = cmp(e, a)
    assert mm is not None and "last column" in mm.message


def test_shape_dtype_count_and_type_must_match() -> None:
    e = torch.rand(4, 5)
    assert cmp(e, e.t().contiguous()).reason == "shape"
    assert cmp(e, e.double()).reason == "dtype"
    assert cmp((e, e), (e,)).reason == "count"
    assert cmp(e, 3.0).reason == "type"
    assert cmp((e, e * 2), [e, e * 2]) is None  # tuple vs list: elementwise, same values
    bad = cmp((e, e * 2), (e, e * 3))
    assert bad is not None and bad.output == "out[1]"


def test_default_tolerances_per_dtype() -> None:
    assert tolerances("fp32", None, None) == (1e-4, 1e-4)
    assert tolerances("bf16", None, None) == (1e-2, 1e-2)
    assert tolerances("fp16", 1e-3, None) == (1e-3, 1e-2)
    assert cmp(torch.ones(3, dtype=torch.bfloat16), torch.ones(3, dtype=torch.bfloat16) * 1.0078125,
               *tolerances("bf16", None, None)) is None


def test_close_in_place_compares_every_element_where_the_outputs_are(monkeypatch) -> None:
    from kiln.tools import sketch
    from kiln.tools.correctness import close_in_place

    a = torch.randn(5, 7)
    assert close_in_place(a, a + 1e-6, atol=1e-4, rtol=1e-4) is True
    bad = a.clone()
    bad[4, 6] += 1.0  # one element anywhere decides it: no sample
    assert close_in_place(a, bad, atol=1e-4, rtol=1e-4) is False
    assert close_in_place((a, a), (a, bad), atol=1e-4, rtol=1e-4) is False
    nan = a.clone()
    nan[0, 0] = float("nan")
    assert close_in_place(nan, nan.clone(), atol=0, rtol=0) is True  # NaN facing NaN
    assert close_in_place(a, nan, atol=1e-4, rtol=1e-4) is False
    # not decidable here: the caller packs and compares as usual
    assert close_in_place(a, a[:2], atol=1e-4, rtol=1e-4) is None
    assert close_in_place(a, 3.0, atol=1e-4, rtol=1e-4) is None
    monkeypatch.setattr(sketch, "SKETCH_MIN_NUMEL", 10)
    assert close_in_place(a, a.clone(), atol=1e-4, rtol=1e-4) is None  # huge: the sketch path's job
