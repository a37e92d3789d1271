"""Attacks through the machine's shared CPU (arbitrary Python past the allowlist, executed with
`run_rejected`). kiln cannot keep a candidate from loading the CPU (no cgroup: docs/integrity.md,
*Out of reach*); what must hold is that the check still ends in time with a record that does not
blame the problem. Everything runs on one CPU, so the test's hogs leave the other cores alone."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from redteam_lib import ATTACK, PROBLEMS, candidate, check_or_blame, ran_as


@contextlib.contextmanager
def one_cpu() -> Iterator[None]:
    """Every thread of this process on one CPU (the fork server a private cache starts, and every
    worker it forks, inherit it); restored after."""
    tasks = [int(t) for t in os.listdir("/proc/self/task")]
    before = {t: os.sched_getaffinity(t) for t in tasks}
    cpu = min(os.sched_getaffinity(0))
    for t in tasks:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(t, {cpu})
    try:
        yield
    finally:
        for t, cpus in before.items():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(t, cpus)


@pytest.mark.slow
@pytest.mark.private_cache
def test_a_candidate_that_starves_the_reference_gets_a_record_not_a_broken_problem(user: Path) -> None:
    timeout = 20.0
    with one_cpu():
        t0 = time.monotonic()
        rec = check_or_blame(candidate("k_starve_reference", user / "project", n=100),
                             problem=PROBLEMS / "relu_busy_ref.py", timeout_s=timeout, **ATTACK)
        took = time.monotonic() - t0
    assert ran_as(rec) == "timeout" and not rec.correct, (rec.status, rec.reasons)
    assert any("reference worker" in r for r in rec.reasons), rec.reasons
    assert took < timeout + 10, took
