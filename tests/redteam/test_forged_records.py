"""Class 3: the parent believes what the candidate's worker writes back. One candidate rewrites
its integrity findings and kernel accounting on the way out (pure PyTorch, reported as its own
kernel); another skews the input fingerprints it reports, so kiln blames the problem."""

from __future__ import annotations

import pytest
from redteam_lib import assert_rejected, candidate, check, check_or_blame, honest, reject_rules

MISSING = "the verdict is still computed from records the candidate's own process writes (no judge outside the accused)"


@pytest.mark.xfail(strict=True, reason=MISSING + "; allowlist does not reject torch.sys")
def test_forged_findings_and_accounting_are_not_believed(user):
    rec = check(candidate("c3_forge_result_file", user / "project"))
    assert_rejected(rec, "static.", "runtime.no-own-kernel")


@pytest.mark.xfail(strict=True, reason=MISSING + ": forged fingerprints make kiln blame the problem")
def test_forged_fingerprints_never_blame_the_problem(user):
    rec = check_or_blame(candidate("c3_blame_the_problem", user / "project"))
    # the fingerprints skewed to no effect: an honest ReLU is ok; rejected only by the allowlist
    assert rec.status in ("ok", "rejected", "crashed"), (rec.status, rec.reasons)
    if rec.status == "rejected":
        assert_rejected(rec, "static.")
    control = check(honest(user / "project"))
    assert control.status == "ok" and not reject_rules(control), control.reasons
