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
