"""Helpers for the check pipeline's tests: tiny fixtures in tests/core/data, the real `kiln` CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture
def data() -> Path:
    return DATA


def _run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    """`kiln ...` in a real subprocess (the console script's entry point)."""
    return subprocess.run([sys.executable, "-m", "kiln.evals.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


@pytest.fixture
def run_cli():  # noqa: ANN201 - returns the helper above
    return _run_cli
