"""Class 3: the parent believes evidence the candidate's own process measures and sends back. One
candidate rewrites its accounting on the way out (pure PyTorch, reported as its own kernel);
one skews the input fingerprints it reports, so kiln blames the problem; one adds forged timing
samples to its replies. Each is refused by the allowlist (the route to kiln's modules); executed
anyway (`run_rejected`: the Python C API from a CUDA candidate's C++ is a route the allowlist leaves
open) the evidence must still not fool kiln."""

from __future__ import annotations

import pytest
from redteam_lib import assert_rejected, candidate, check, check_or_blame, honest, reject_rules

TIMED = {"time_on_cpu": True, "baselines": ["eager"], "timing_timeout_s": 4.0}  # the timing protocol on CPU


@pytest.mark.parametrize("run_rejected", [False, True], ids=["as-is", "executed-anyway"])
def test_forged_accounting_is_not_believed(user, run_rejected):
    """Executed anyway, its patch of the worker's `op_integrity` changes nothing: kiln bound its handlers
    and evidence functions before the candidate was imported (a deeper patch, native code rewriting
    kiln's objects in memory, is out of reach: docs/integrity.md)."""
    rec = check(candidate("c3_forge_evidence", user / "project"), run_rejected=run_rejected)
    assert_rejected(rec, "static.", "runtime.")
    if run_rejected:
        assert any(r.startswith("runtime.") for r in reject_rules(rec)), reject_rules(rec)


@pytest.mark.parametrize("run_rejected", [False, True], ids=["as-is", "executed-anyway"])
def test_forged_fingerprints_never_blame_the_problem(user, run_rejected):
    """The input fingerprints a candidate reports count only against it: the reference checks the
    problem's own reproducibility."""
    rec = check_or_blame(candidate("c3_blame_the_problem", user / "project"), run_rejected=run_rejected)
    assert rec.status in ("ok", "rejected", "crashed", "incorrect"), (rec.status, rec.reasons)
    if rec.status == "rejected":
        assert_rejected(rec, "static.")
    control = check(honest(user / "project"))
    assert control.status == "ok" and not reject_rules(control), control.reasons


@pytest.mark.parametrize("run_rejected", [False, True], ids=["as-is", "executed-anyway"])
def test_forged_timing_samples_are_not_believed(user, run_rejected):
    """Executed anyway, the forged fields in every reply (50 samples of 0.2 us, a near-zero worker time)
    move nothing: every sample is one of kiln's own laps, and an interpreted Triton call takes
    milliseconds (the forged samples would make the median 0.2 us)."""
    rec = check(candidate("c3_flatter_samples", user / "project"), run_rejected=run_rejected, **TIMED)
    if not run_rejected:
        assert_rejected(rec, "static.")
        return
    t, ti = rec.timing, rec.integrity.timing
    assert t and t.measured and ti.method == "laps", rec.reasons
    assert t.candidate.n_samples == ti.n_laps and t.candidate.median_us > 100.0, (t.candidate, ti.n_laps)



@pytest.mark.parametrize("mode", ["projection", "peak", "bloated", "extra"])
def test_a_number_no_float_can_hold_is_the_candidates_failure(user, mode):
    """A committed projection no float holds breaks the protocol (its record is typed; before, its audit
    failed it), as do one of 2 M empty objects (refused before they are parsed) or an unknown field;
    a claimed peak memory out of any range breaks the protocol (`crashed`; on a GPU kiln's division by the eager peak raised
    OverflowError, on CPU the record kept the claim). Never the problem's fault, never kiln's."""
    rec = check_or_blame(candidate("k_forge_timing", user / "project", mode=mode), run_rejected=True,
                         static="denylist", **TIMED)
    if mode in ("projection", "bloated", "extra"):  # projections are typed records, and bounded before parsing
        why = {"projection": "valid number", "bloated": "JSON objects and arrays", "extra": "junk"}[mode]
        assert rec.status == "crashed" and any("broke the worker protocol" in r and why in r for r in rec.reasons), \
            (rec.status, rec.reasons)
    else:
        assert rec.status == "crashed" and any("peak_bytes" in r for r in rec.reasons), (rec.status, rec.reasons)
