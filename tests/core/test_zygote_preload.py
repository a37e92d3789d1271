"""The fork server's preloads must leave forked children able to use CUDA: a module whose import
touches the CUDA runtime (torch then marks every forked child a 'bad fork') is left out."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kiln.tools.zygote import Zygote

POISON = '''import torch
torch.cuda._is_in_bad_fork = lambda: True  # what a CUDA device-count query at import time does to forks
'''


def _env(tmp_path: Path, extra: str) -> dict[str, str]:
    (tmp_path / "kiln_test_poison.py").write_text(POISON)
    (tmp_path / "kiln_test_clean.py").write_text("VALUE = 1\n")
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


def test_clean_preloads_are_all_kept(tmp_path: Path) -> None:
    z = Zygote(_env(tmp_path, "kiln_test_clean,json"))
    try:
        assert z.skipped == []
    finally:
        z.close()


def test_the_server_may_cache_bytecode_but_its_workers_do_not(tmp_path: Path) -> None:
    from kiln.tools import zygote
    from kiln.tools.check_run import zygote_env
    from kiln.tools.worker import JobSpec

    spec = JobSpec(role="reference", cases=[], secret=0, work_dir=str(tmp_path), cache_root=str(tmp_path))
    env = zygote_env(spec, tmp_path)
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
