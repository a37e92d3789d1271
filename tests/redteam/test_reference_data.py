"""Class 2: the candidate reaches what only the judge should hold: the secret seed in its job file
(it precomputes every answer), the reference worker's saved outputs (it returns them), or the
files the parent compares against (it overwrites them with its own wrong answers). An honest
verdict is `rejected` by the allowlist, or, where a sandbox stops the reads halfway, `incorrect`
(the candidate's answers without the stolen data are wrong) or `compile_error` (its import fails)."""

from __future__ import annotations

import pytest
from redteam_lib import assert_stopped, candidate, check

MISSING = ("the reference worker's output files sit next to the candidate's folder, readable and writable: no "
           "sandbox, nor an allowlist rejecting torch.os / torch.serialization (either stops it)")


@pytest.mark.parametrize(("name", "policy"), [
    pytest.param("c2_seed_precompute", "strict", id="seed"),  # fixed on main: the job holds no seed
    pytest.param("c2_read_reference_outputs", "partial", id="read", marks=pytest.mark.xfail(strict=True, reason=MISSING)),
    pytest.param("c2_overwrite_reference_outputs", "strict", id="overwrite",
                 marks=pytest.mark.xfail(strict=True, reason=MISSING)),
])
def test_judges_data_is_out_of_reach(user, name, policy):
    rec = check(candidate(name, user / "project"), policy=policy)
    assert_stopped(rec, "static.", also=frozenset({"incorrect", "compile_error", "crashed"}))
