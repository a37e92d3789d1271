"""One kiln process, two cache roots (a library user, or a test per tmp dir, that changes
KILN_CACHE_DIR between checks): each check's workers must reach the compile cache of its own root.
The sandboxed fork server binds only the cache root it was started for, so a server started for
the first root cannot serve the second (found on the H200: Triton's JIT wrote to a cache dir the
old server's bubblewrap did not mount, and the honest candidate "raised PermissionError")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kiln.tools.check import check
from kiln.tools.records import CheckOptions

FIXTURES = Path(__file__).parents[1] / "fixtures"
RELU = (FIXTURES / "kernels" / "correct" / "triton" / "relu.py").read_text()
# what Triton's JIT does on a GPU (the interpreter writes nothing): write into TRITON_CACHE_DIR,
# which kiln points into the candidate's compile cache under the current cache root
WRITES_ITS_CACHE = RELU.replace("        super().__init__()\n", """        super().__init__()
        import os
        os.makedirs(os.environ["TRITON_CACHE_DIR"], exist_ok=True)
        with open(os.path.join(os.environ["TRITON_CACHE_DIR"], "jit.txt"), "w") as f:
            f.write("compiled")
""", 1)


def test_each_cache_root_gets_a_server_that_mounts_it(box, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    private = tmp_path / "private"  # like /tmp/pytest-of-root: its owner only
    private.mkdir(mode=0o700)
    cand = tmp_path / "cand.py"
    cand.write_text(WRITES_ITS_CACHE)
    opts = CheckOptions(device="cpu", trials=1, run_rejected=True, policy="partial", isolation="strict")
    for name in ("first", "second"):
        root = private / name / "cache"
        monkeypatch.setenv("KILN_CACHE_DIR", str(root))
        rec = check(FIXTURES / "problems" / "relu.py", cand, opts)
        # the allowlist rejects the environment read; run anyway, it must have run and passed
        assert "before the integrity verdict: ok" in rec.reasons, (name, rec.status, rec.reasons)
        written = list((root / "cand").rglob("jit.txt"))
        assert written, f"{name}: the candidate's cache write did not land under {root}"
        assert os.stat(private).st_mode & 0o777 == 0o700


def test_a_retired_server_finishes_its_running_workers_first(tmp_path: Path) -> None:
    """Moving to another cache root takes the old root's server out of use at once, but stops it
    only when no worker it forked is still running (a check in flight keeps its workers)."""
    from kiln.tools.check.servers import zygote_env
    from kiln.tools.sandbox import zygote

    old = zygote.get_zygote(("test-slot", str(tmp_path / "a")), zygote_env("cpu", 0, tmp_path / "a"))
    assert old is not None and old.alive()
    status = tmp_path / "worker.status"
    old._running.add(str(status))  # a worker in flight: the server writes this file when it ends
    zygote.retire(("test-slot",), keep=str(tmp_path / "b"))
    assert ("test-slot", str(tmp_path / "a")) not in zygote._POOL and old.alive()
    status.write_text("0")
    zygote.retire(("test-slot",), keep=str(tmp_path / "b"))
    old.proc.wait(timeout=10)
    assert not old.alive() and old not in zygote._RETIRED
