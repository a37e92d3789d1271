"""Classes 7 and 8: the work is done where the operator accounting does not look (numpy, a Triton
grid callable, a Triton launch hook) or PyTorch's answer is laundered through a copy kernel. The
kernel that runs only moves values; a verdict that believes the accounting says `ok`. Each runs even
where the allowlist refuses it (`run_rejected`): the run-time rule must catch it on its own."""

from __future__ import annotations

import pytest
from redteam_lib import assert_rejected, candidate, check

CASES = [
    pytest.param("c7_numpy_forward", "strict", id="numpy"),
    pytest.param("c7_grid_callable", "strict", id="grid-callable"),
    pytest.param("c7_launch_hook", "strict", id="launch-hook"),
    pytest.param("c8_launder_copy", "partial", id="launder-copy"),
]


@pytest.mark.parametrize(("name", "policy"), CASES)
def test_work_hidden_from_the_accounting_is_rejected(user, name, policy):
    rec = check(candidate(name, user / "project"), policy=policy, run_rejected=True)
    assert_rejected(rec, "runtime.")  # executed even where the allowlist refuses it: the run-time rule must hold
