"""Class 1: a candidate reaches kiln's own modules and replaces their functions. Each forward is
plain PyTorch (no kernel of its own), so an honest verdict is `rejected`: by the allowlist (the
routes), and, executed anyway (`run_rejected`, as if the allowlist were bypassed: the Python C API
from C++ still is), by `runtime.no-own-kernel` judged from evidence the candidate cannot forge."""

from __future__ import annotations

import pytest
from redteam_lib import assert_rejected, candidate, check, reject_rules

ROUTES = ["c1_torch_sys_modules", "c1_pkgutil_resolve", "c1_pydoc_locate", "c1_ctypes_pyrun",
          "c1_getattr_decoded"]


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


def test_executed_anyway_the_patch_does_not_hide_the_missing_kernel(user):
    """Its patch of kiln's runtime module (`runtime.judge = lenient`) is refused: kiln's modules are
    read-only inside the candidate's worker, and the parent judges with its own copy anyway."""
    rec = check(candidate("c1_torch_sys_modules", user / "project"), run_rejected=True)
    assert rec.status != "ok" and not rec.correct, (rec.status, rec.reasons)
    assert "read-only" in " ".join(rec.reasons) or "runtime.no-own-kernel" in reject_rules(rec), rec.reasons
