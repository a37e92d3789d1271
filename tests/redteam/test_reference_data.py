"""Class 2: the candidate reaches what only the judge should hold: the secret seed in its job file
(it precomputes every answer), the reference worker's saved outputs (it returns them), or the
files the parent compares against (it overwrites them with its own wrong answers). An honest
verdict is `rejected` by the allowlist, or, where a sandbox stops the reads halfway, `incorrect`
(the candidate's answers without the stolen data are wrong) or `compile_error` (its import fails)."""

from __future__ import annotations

import pytest
from redteam_lib import assert_stopped, candidate, check


@pytest.mark.parametrize(("name", "policy"), [
    pytest.param("c2_seed_precompute", "strict", id="seed"),  # fixed on main: the job holds no seed
    pytest.param("c2_read_reference_outputs", "partial", id="read"),
    pytest.param("c2_overwrite_reference_outputs", "strict", id="overwrite"),
])
def test_judges_data_is_out_of_reach(user, name, policy):
    rec = check(candidate(name, user / "project"), policy=policy, run_rejected=True)
    assert_stopped(rec, "static.", also=frozenset({"incorrect", "compile_error", "crashed"}))
