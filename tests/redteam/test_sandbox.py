"""Security, in-process `check()`: what a candidate (or a stress case) does to the machine while
kiln checks it. Files in the user's home and project, a connection to a local server, a daemon
that outlives the check, a signal to kiln's other processes. Each test plants the targets (a
victim file, a TCP server on 127.0.0.1, a unique daemon command line) and looks for the damage."""

from __future__ import annotations

import secrets
import time
from pathlib import Path

import pytest
from redteam_lib import (
    CASES,
    assert_contained,
    candidate,
    check,
    check_or_blame,
    honest,
    kill_pids,
    pids_with_cmdline,
    render,
    tcp_sink,
)


def _damage(user: Path, sink, token: str) -> list[str]:
    """Every side effect the s_* candidates try, that happened."""
    out = [f"created {p}" for p in (user / "home" / "redteam-created.txt", user / "project" / "redteam-created.txt")
           if p.exists()]
    out += [f"deleted {p}" for p in (user / "home" / "redteam-victim.txt", user / "project" / "redteam-victim.txt")
            if not p.exists()]
    out += [f"connected to the test's server and sent {data!r}" for data in sink.accepted]
    time.sleep(0.5)  # a daemon that survived the check has had time to show itself
    out += [f"daemon pid {pid} outlived the check" for pid in pids_with_cmdline(token)]
    return out


@pytest.mark.parametrize("name", [
    pytest.param("s_plain_apis", id="plain"),  # fixed on main: a statically rejected candidate never runs
    pytest.param("s_allowed_imports", id="allowed-imports"),
])
def test_no_files_network_or_daemons(user, name):
    token = f"600.{secrets.randbelow(10**12):012d}"
    for folder in ("home", "project"):
        (user / folder / "redteam-victim.txt").write_text("the user's file")
    with tcp_sink() as sink:
        try:
            rec = check(candidate(name, user / "project", port=sink.port, token=token), run_rejected=True)
            damage = _damage(user, sink, token)
        finally:
            kill_pids(pids_with_cmdline(token))
    assert not damage, damage
    assert_contained(rec)


def test_killing_the_reference_worker_does_not_blame_the_problem(user):
    rec = check_or_blame(candidate("s_kill_reference", user / "project"), run_rejected=True)
    assert_contained(rec)  # ok: the kill found no one to kill
    assert check(honest(user / "project")).status == "ok"


def test_a_stress_case_module_is_sandboxed_too(user):
    with tcp_sink() as sink:
        case = render(CASES / "evil_case.py", user / "project" / "cases", port=sink.port)
        rec = check(honest(user / "project"), cases=[case])
        damage = [f"connected and sent {d!r}" for d in sink.accepted]
    created = user / "home" / "redteam-case-created.txt"
    damage += [f"created {created}"] if created.exists() else []
    assert not damage, damage
    assert rec.status == "ok", rec.reasons  # the candidate is honest; the case module's failures are hidden


def test_a_case_that_patches_its_judge_passes_only_its_own_trials(user):
    """A colluding Proposer: its case patches the comparison in the process that imports it. The
    problem's trials are judged by a reference worker that never imported the case, so a copying
    kernel (wrong on the negative draws) still fails them, while the case's own groups pass."""
    case = render(CASES / "judge_patch_case.py", user / "project" / "cases")
    rec = check(candidate("identity_copy", user / "project"), cases=[case])
    assert rec.status == "incorrect", (rec.status, rec.reasons)
    by_group = {(t.case, t.distribution): t.passed for t in rec.correctness.trials if t.phase == "first_call"}
    assert by_group[("problem", "neg")] is False, by_group
    assert any(c != "problem" and d == "neg" and ok for (c, d), ok in by_group.items()), by_group  # its own: forged
    assert check(honest(user / "project"), cases=[case]).status == "ok"
