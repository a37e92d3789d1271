"""The fork server's preloads must leave forked children able to use CUDA: a module whose import
touches the CUDA runtime (torch then marks every forked child a 'bad fork') is left out."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from kiln.tools.sandbox.zygote import Zygote

POISON = '''import torch
torch.cuda._is_in_bad_fork = lambda: True  # what a CUDA device-count query at import time does to forks
'''


WARM = '''import os
def warm():  # counts its calls in a file
    with open({marker!r}, "a") as f:
        f.write("x")
def spoil():
    import torch
    torch.cuda._is_in_bad_fork = lambda: True
'''


def _env(tmp_path: Path, extra: str) -> dict[str, str]:
    (tmp_path / "kiln_test_poison.py").write_text(POISON)
    (tmp_path / "kiln_test_clean.py").write_text("VALUE = 1\n")
    (tmp_path / "kiln_test_warm.py").write_text(WARM.format(marker=str(tmp_path / "warmed")))
    path = os.pathsep.join([str(tmp_path), *sys.path[1:]])
    return {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": path, "KILN_ZYGOTE_PRELOAD_EXTRA": extra,
            "CUDA_VISIBLE_DEVICES": "", "HOME": str(tmp_path)}


def test_a_preload_that_spoils_forks_is_left_out(tmp_path: Path) -> None:
    z = Zygote(_env(tmp_path, "kiln_test_clean,kiln_test_poison,json"))
    try:
        assert z.skipped == ["kiln_test_poison"]
        assert z.alive()
    finally:
        z.close()


def test_a_module_function_preload_is_called_once_and_a_spoiling_one_left_out(tmp_path: Path) -> None:
    """`module:function` entries warm what a library caches in-process (Triton's key) before the forks."""
    z = Zygote(_env(tmp_path, "kiln_test_warm:warm,kiln_test_warm:spoil"))
    try:
        assert z.skipped == ["kiln_test_warm:spoil"]
        assert z.alive()
        assert (tmp_path / "warmed").read_text() in ("x", "xx")  # once per server start (one restart to skip)
    finally:
        z.close()


def test_clean_preloads_are_all_kept(tmp_path: Path) -> None:
    z = Zygote(_env(tmp_path, "kiln_test_clean,json"))
    try:
        assert z.skipped == []
    finally:
        z.close()


def test_the_server_may_cache_bytecode_but_its_workers_do_not(tmp_path: Path) -> None:
    from kiln.tools.check.servers import zygote_env
    from kiln.tools.sandbox import zygote

    env = zygote_env("cpu", 0, tmp_path)
    assert "PYTHONDONTWRITEBYTECODE" not in env and env["CUDA_VISIBLE_DEVICES"] == ""
    # a check imports the problem and candidate in forked workers: no __pycache__ appears beside them
    import shutil

    from kiln.tools.check import check
    from kiln.tools.records import CheckOptions

    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    shutil.copy(fixtures / "problems" / "relu.py", tmp_path / "relu.py")
    shutil.copy(fixtures / "kernels" / "correct" / "triton" / "relu.py", tmp_path / "relu_new.py")
    rec = check(tmp_path / "relu.py", tmp_path / "relu_new.py", CheckOptions(device="cpu", trials=1, time=False))
    assert rec.status == "ok", rec.reasons
    assert zygote._POOL and not (tmp_path / "__pycache__").exists()


def test_servers_for_different_gpus_start_side_by_side(monkeypatch) -> None:
    """In a 2-GPU batch both fork servers start at once; one start (seconds) must not wait for the
    other's. Each stand-in server's start blocks until both have begun: a global lock would
    deadlock it into the timeout. The same key is still started once."""
    import threading

    from kiln.tools.sandbox import zygote

    both = threading.Barrier(2, timeout=10)
    started: list[str] = []

    class Starting:
        def __init__(self, env: dict[str, str]) -> None:
            started.append(env["KEY"])
            both.wait()

        def alive(self) -> bool:
            return True

    monkeypatch.setattr(zygote, "Zygote", Starting)
    monkeypatch.setattr(zygote, "_POOL", {})
    monkeypatch.setattr(zygote, "_KEY_LOCKS", {})
    got: dict[int, object] = {}
    threads = [threading.Thread(target=lambda i=i: got.__setitem__(i, zygote.get_zygote(("cuda", i % 2), {"KEY": str(i % 2)})))
               for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert sorted(started) == ["0", "1"], "each GPU's server starts exactly once"
    assert got[0] is got[2] and got[1] is got[3] and got[0] is not got[1]


def test_a_sandboxed_server_leaves_the_same_preloads_out(tmp_path: Path) -> None:
    """Inside bubblewrap (the check's default when it is installed) the server still probes its
    forks and starts again without a spoiling preload: the restart keeps its sandbox plan."""
    from kiln.tools.sandbox.box import sandbox_for

    box = sandbox_for()
    if box.bwrap is None:
        pytest.skip("no bubblewrap here (kiln doctor)")
    env = _env(tmp_path, "kiln_test_clean,kiln_test_poison,json")
    z = Zygote(env, box.server_command([sys.executable, "-m", "kiln.tools.sandbox.zygote"], env=env, write=[]))
    try:
        assert z.skipped == ["kiln_test_poison"] and z.alive() and z.confined
    finally:
        z.close()
