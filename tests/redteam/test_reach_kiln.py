"""Class 1: a candidate reaches kiln's own modules and replaces their functions, through routes
the current static scan does not see. Each forward is plain PyTorch (no kernel of its own), so an
honest verdict is `rejected` (the allowlist's static rules, or `runtime.no-own-kernel` computed
where the candidate cannot reach, or a check that fails closed)."""

from __future__ import annotations

import pytest
from redteam_lib import assert_rejected, candidate, check

ROUTES = ["c1_torch_sys_modules", "c1_pkgutil_resolve", "c1_pydoc_locate", "c1_ctypes_pyrun",
          "c1_getattr_decoded", "c1_integrity_unimportable"]
MISSING = "allowlist static policy and a judge outside the candidate's process are not there yet"


@pytest.mark.xfail(strict=True, reason=MISSING)
@pytest.mark.parametrize("name", ROUTES)
def test_patching_kiln_through_another_route_is_rejected(user, name):
    rec = check(candidate(name, user / "project"))
    assert_rejected(rec, "static.", "runtime.no-own-kernel", "integrity.")
