"""An output that passes elementwise but is off as a whole (an error below atol on small values)
gets a `correctness.hidden-error` warning, not silence; one grossly off as a whole (zeros where
every output lies below atol) is rejected."""

from __future__ import annotations

import torch

from kiln.tools.check.compare import Comparison, hidden_error
from kiln.tools.correctness import compare, pack, relative_l2
from kiln.tools.records import TrialRecord


def _softmax_plus_one(x: torch.Tensor) -> torch.Tensor:  # the bug: exp / (sum + 1)
    e = torch.exp(x - x.max(dim=-1, keepdim=True).values)
    return e / (e.sum(dim=-1, keepdim=True) + 1.0)


def test_a_wrong_denominator_passes_elementwise_but_shows_in_the_relative_error() -> None:
    x = torch.rand(64, 4096)  # row sums of exp ~2600: the +1 shifts every output by ~4e-4 of itself
    exp, bad = pack(torch.softmax(x, dim=-1)), pack(_softmax_plus_one(x))
    assert compare(exp, bad, atol=1e-4, rtol=1e-4) is None  # the elementwise test is blind to it
    rel = relative_l2(exp, bad)
    assert rel is not None and rel > 3e-4
    honest = pack(torch.softmax(x.double(), dim=-1).float())  # another summation order, same maths
    assert (relative_l2(exp, honest) or 0.0) < 1e-5


def test_the_warning_names_the_trial_and_the_size_of_the_error() -> None:
    cmp = Comparison(passed=True, trials=[
        TrialRecord(case="problem", distribution="x1", trial=0, passed=True, rel_l2_err=2e-7),
        TrialRecord(case="problem", distribution="x3", trial=1, passed=True, rel_l2_err=4e-3)])
    hidden_error(cmp, rtol=1e-4)
    assert [f.rule for f in cmp.findings] == ["correctness.hidden-error"]
    assert cmp.findings[0].severity == "warn" and "0.004" in cmp.findings[0].evidence
    assert "inputs scaled x3, trial 1" in cmp.findings[0].evidence


def test_honest_rounding_gets_no_warning() -> None:
    cmp = Comparison(passed=True, trials=[
        TrialRecord(case="problem", distribution="x1", trial=0, passed=True, rel_l2_err=3e-6)])
    hidden_error(cmp, rtol=1e-4)
    assert cmp.findings == []


def test_zeros_for_outputs_below_atol_are_rejected() -> None:
    """KernelBench's 23_Softmax: 393216 outputs per row, each ~2.5e-6, all below atol 1e-4, so a
    kernel returning zeros passes every elementwise test; as a whole it is 100 % wrong."""
    x = torch.rand(4, 393216)
    exp, zeros = pack(torch.softmax(x, dim=-1)), pack(torch.zeros(4, 393216))
    assert compare(exp, zeros, atol=1e-4, rtol=1e-4) is None
    rel = relative_l2(exp, zeros)
    cmp = Comparison(passed=True, trials=[
        TrialRecord(case="problem", distribution="x1", trial=0, passed=True, rel_l2_err=rel)])
    hidden_error(cmp, rtol=1e-4)
    assert rel == 1.0 and [(f.rule, f.severity) for f in cmp.findings] == [("correctness.hidden-error", "reject")]
