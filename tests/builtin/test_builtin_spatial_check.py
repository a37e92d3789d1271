"""The new families' first candidates through kiln's real check (CPU, Triton interpreter) under
`--policy strict`, which rejects any PyTorch compute in forward: one problem per family (a
transposed conv, a depthwise conv, a pooling, training-mode batch norm, attention, and a
three-kernel pipeline: conv, group norm, logsumexp) is `ok` and correct."""

from __future__ import annotations

from pathlib import Path

import pytest
from spatial_lib import CHECKED  # same directory (pytest puts it on sys.path)

from kiln.tools.check import check
from kiln.tools.records import CheckOptions

PROBLEMS = CHECKED
OPTS = CheckOptions(device="cpu", trials=1, timeout_s=600, policy="strict")


@pytest.mark.slow
@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: f"{p.parent.name}_{p.name.split('_')[0]}")
def test_kiln_check_passes_under_strict_policy(problem: Path, tmp_path: Path, gen) -> None:
    cand = gen(problem, tmp_path)
    rec = check(problem, cand, OPTS)
    assert rec.status == "ok" and rec.correct, (rec.status, rec.reasons)
