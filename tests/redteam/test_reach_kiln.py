"""Class 1: a candidate reaches kiln's own modules and replaces their functions, through routes
the current static scan does not see. Each forward is plain PyTorch (no kernel of its own), so an
honest verdict is `rejected` (the allowlist's static rules, or `runtime.no-own-kernel` computed
where the candidate cannot reach, or a check that fails closed)."""

from __future__ import annotations

import pytest
from redteam_lib import assert_rejected, candidate, check, reject_rules

ROUTES = ["c1_torch_sys_modules", "c1_pkgutil_resolve", "c1_pydoc_locate", "c1_ctypes_pyrun",
          "c1_getattr_decoded"]
MISSING = "allowlist static policy and a judge outside the candidate's process are not there yet"


@pytest.mark.xfail(strict=True, reason=MISSING)
@pytest.mark.parametrize("name", ROUTES)
def test_patching_kiln_through_another_route_is_rejected(user, name):
    rec = check(candidate(name, user / "project"))
    assert_rejected(rec, "static.", "runtime.no-own-kernel", "integrity.")


def test_unimportable_integrity_checks_fail_closed(user):
    """Fixed on main (check session): the worker reports kiln's missing module, the parent says error."""
    rec = check(candidate("c1_integrity_unimportable", user / "project"))
    if rec.status == "rejected":
        assert_rejected(rec, "static.")
        return
    assert rec.status == "error" and not rec.correct, (rec.status, rec.reasons)
    assert "fails closed" in " ".join(rec.reasons) and not reject_rules(rec)
