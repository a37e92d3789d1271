"""Shared test helpers. GPU tests are marked `gpu` and deselected by default (see pyproject)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"

# Tests start hundreds of kiln processes, each with its own cache root: a resident fork server each
# (kiln.tools.sandbox.resident, a user's default) would leave dozens of idle servers of ~1 GB behind.
# The suite runs per-process servers; tests/sandbox/test_resident.py runs the resident one.
os.environ.setdefault("KILN_FORK_SERVER", "process")


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


def cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - a broken torch install just means "no GPU"
        return False


# Modules whose tests time something or race a clock (a stage deadline, a signal answered "at once",
# a case retired for being slow, a wall-time bound): `make test` runs them alone, after the rest
# has run two at a time (pytest-xdist), so a neighbour's load never decides their verdict.
SERIAL = {
    "builtin/test_builtin_huge_inputs.py", "compile/test_nvcc.py", "compile/test_time_loop.py",
    "core/test_check.py", "core/test_isolation.py", "core/test_protocol.py", "corpus/test_corpus_problems.py",
    "curriculum/test_scheduling.py", "graphs/test_ctrl_c.py", "graphs/test_graph_cli.py", "graphs/test_suite.py",
    "graphs/test_transcripts.py", "model/test_model_cli.py", "redteam/test_cli.py", "redteam/test_load.py",
    "sandbox/test_cache_roots.py", "sandbox/test_confined.py", "sandbox/test_fork_server.py",
}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
@pytest.fixture(autouse=True)
def _triton_interpret_kept() -> object:
    """kiln switches its own process to Triton's interpreter for a CPU bundle or model run
    (`TRITON_INTERPRET`, read when a kernel is decorated); a test that does so in-process must not
    leave a later test of the same worker compiling kernels through the interpreter (the sm_90
    offline compile tests then saw no JITFunction)."""
    before = os.environ.get("TRITON_INTERPRET")
    yield
    if before is None:
        os.environ.pop("TRITON_INTERPRET", None)
    else:
        os.environ["TRITON_INTERPRET"] = before


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(__file__).parent
    for item in items:
        if item.path.relative_to(root).as_posix() in SERIAL:
            item.add_marker(pytest.mark.serial)
