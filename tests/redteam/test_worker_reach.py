"""What a worker can reach beyond the files Landlock lets it open (arbitrary Python past the
allowlist, executed with `run_rejected`): metadata of what the fork server shares with every worker,
the machine's sysctls. Each attack, contained, is an honest ReLU and comes back `ok`; what it could
change it names, and the check fails to load."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from redteam_lib import ATTACK, candidate, check, honest, ran_as


@pytest.mark.private_cache
def test_a_worker_cannot_chmod_or_touch_what_other_checks_share(user: Path) -> None:
    """The candidates' cache root (mode 000 would leave every later check without a cache), kiln's
    control dir, the scratch root, this check's inputs, the sandbox's /tmp and /dev/shm, the host's
    /dev/null: all read-only in the worker's view (`confine._read_only_view`)."""
    root = Path(os.environ["KILN_CACHE_DIR"]) / "cand"
    root.mkdir(parents=True, exist_ok=True)
    before = os.stat(root)
    try:
        rec = check(candidate("k_metadata", user / "project", mode="chmod"), **ATTACK)
        after = os.stat(root)
    finally:
        os.chmod(root, 0o755)
    assert ran_as(rec) == "ok", (rec.status, rec.reasons)
    assert after.st_mode == before.st_mode and after.st_mtime > 0  # the attack set 000 and the epoch
    control = check(honest(user / "project"))  # another source: a new cache dir in the same root
    assert control.status == "ok", control.reasons


def test_a_worker_cannot_write_the_machines_sysctls(user: Path) -> None:
    """A fresh /proc in the worker's PID namespace shows the machine's sysctls; kiln run as root
    (a container) gave its workers root's uid outside, which is all a sysctl's mode bits ask
    (`kernel.core_pattern` runs a program as root on the next crash). `confine._cover_proc` binds
    /proc/sys and the SysRq trigger read-only, as bubblewrap does for its own /proc."""
    rec = check(candidate("k_metadata", user / "project", mode="sysctl"), **ATTACK)
    assert ran_as(rec) == "ok", (rec.status, rec.reasons)


def test_removing_a_tree_a_worker_chmodded_follows_no_link(tmp_path: Path) -> None:
    """What a worker may still chmod (its own dir, its compile cache) kiln removes whatever the modes
    (`files.remove_tree`: kiln run as another user than root could not list a 000 folder), and the
    modes it restores are never those of a link's target."""
    from kiln.tools.files import _PATH_FLAGS, _unlock, remove_tree

    outside = tmp_path / "outside"
    outside.mkdir(mode=0o500)
    tree = tmp_path / "work"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "b" / "f").write_text("x")
    (tree / "a" / "link").symlink_to(outside, target_is_directory=True)
    for d in (tree / "a" / "b", tree / "a"):
        d.chmod(0)
    _unlock(os.open(tree, _PATH_FLAGS), 100)
    assert all((tree / p).stat().st_mode & 0o700 == 0o700 for p in ("a", "a/b"))
    assert outside.stat().st_mode & 0o777 == 0o500
    remove_tree(tree)
    assert not tree.exists() and outside.is_dir() and outside.stat().st_mode & 0o777 == 0o500
