"""Helpers for the whole-model tests: scenarios and the CLI run in subprocesses under Triton's
interpreter (tests/model/scenario.py says why)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
REPO = HERE.parent.parent
CNN = f"{REPO}/examples/model/small_cnn.py:make"
BLOCK = f"{REPO}/examples/model/small_transformer.py:make"
RESBLOCK = f"{REPO}/examples/model/sd_resblock.py:make_small"


def interp_env() -> dict[str, str]:
    return dict(os.environ, TRITON_INTERPRET="1")


def scenario(*args: str, timeout_s: float = 300) -> dict:
    proc = subprocess.run([sys.executable, str(HERE / "scenario.py"), *args], env=interp_env(), cwd=REPO,
                          capture_output=True, text=True, timeout=timeout_s)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1])


def kiln(*args: str, cwd: Path, timeout_s: float = 600, interpret: bool = True) -> subprocess.CompletedProcess:
    """The `kiln` command in a subprocess (under Triton's interpreter unless `interpret=False`: GPU)."""
    exe = Path(sys.executable).parent / "kiln"
    env = interp_env() if interpret else {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run([str(exe), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout_s)


@pytest.fixture(scope="module")
def cnn_bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("cnn")
    info = scenario("bundle", CNN, str(out))
    return out / "bundle", info
