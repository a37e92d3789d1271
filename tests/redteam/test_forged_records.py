"""Class 3: the parent believes evidence the candidate's own process measures and sends back. One
candidate rewrites its accounting on the way out (pure PyTorch, reported as its own kernel);
one skews the input fingerprints it reports, so kiln blames the problem; one forges its timing
samples so that their sum still matches kiln's clock around the loop. Each is refused by the
allowlist (the route to kiln's modules); executed anyway (`run_rejected`: the Python C API from a
CUDA candidate's C++ is a route the allowlist leaves open) the evidence must still not fool kiln."""

from __future__ import annotations

import pytest
from redteam_lib import IN_PROCESS, assert_rejected, candidate, check, check_or_blame, honest, reject_rules

EXECUTED_ANYWAY = [pytest.param(False, id="as-is"),
                   pytest.param(True, id="executed-anyway", marks=pytest.mark.xfail(strict=True, reason=IN_PROCESS))]
TIMED = {"time_on_cpu": True, "baselines": ["eager"], "timing_timeout_s": 4.0}  # the timing protocol on CPU


@pytest.mark.parametrize("run_rejected", EXECUTED_ANYWAY)
def test_forged_accounting_is_not_believed(user, run_rejected):
    rec = check(candidate("c3_forge_evidence", user / "project"), run_rejected=run_rejected)
    assert_rejected(rec, "static.", "runtime.")
    if run_rejected:
        assert any(r.startswith("runtime.") for r in reject_rules(rec)), reject_rules(rec)


@pytest.mark.parametrize("run_rejected", EXECUTED_ANYWAY)
def test_forged_fingerprints_never_blame_the_problem(user, run_rejected):
    rec = check_or_blame(candidate("c3_blame_the_problem", user / "project"), run_rejected=run_rejected)
    # the fingerprints skewed to no effect: an honest ReLU is ok; rejected only by the allowlist
    assert rec.status in ("ok", "rejected", "crashed"), (rec.status, rec.reasons)
    if rec.status == "rejected":
        assert_rejected(rec, "static.")
    control = check(honest(user / "project"))
    assert control.status == "ok" and not reject_rules(control), control.reasons


@pytest.mark.parametrize("run_rejected", [
    pytest.param(False, id="as-is"),
    pytest.param(True, id="executed-anyway", marks=pytest.mark.xfail(
        strict=True, reason="kiln's clock bound on the median (timing.parent-bound) is a warning until its harness "
                            "overhead is calibrated on the H200")),
])
def test_forged_timing_samples_are_not_believed(user, run_rejected):
    """The oracle is kiln's own clock around the candidate's loop (the same check, the same load):
    an honest kernel's median is about its loop's wall time per call (the Triton interpreter takes
    milliseconds a call; on a busy machine the harness's overhead is noisy, so an honest median reads
    0.75-0.9 of the loop's time per call); the forgery claims 0.2 of it."""
    rec = check(candidate("c3_flatter_samples", user / "project"), run_rejected=run_rejected, **TIMED)
    if not run_rejected or any(r.startswith("timing.") for r in reject_rules(rec)):
        assert_rejected(rec, "timing.", "static.")
        return
    ti = rec.integrity.timing
    assert rec.timing and rec.timing.measured and ti and ti.parent_wall_s and ti.n_calls_loop, rec.reasons
    per_call_us = (ti.parent_wall_s * 1e6 - ti.n_calls_loop * (ti.overhead_us or 0.0)) / ti.n_calls_loop
    ratio = rec.timing.candidate.median_us / per_call_us
    assert ratio > 0.5, f"median {rec.timing.candidate.median_us:.0f} us, kiln's clock saw {per_call_us:.0f} us a call"
