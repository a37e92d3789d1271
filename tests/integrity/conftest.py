"""Helpers for the integrity tests: candidate modules imported from real files under the Triton
interpreter (CPU), the way the candidate worker imports them."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
import uuid
from pathlib import Path
from types import ModuleType

import pytest

TRITON_HEAD = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


def relu(x):
    y = torch.empty_like(x)
    n = x.numel()
    relu_kernel[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256)
    return y
"""


@pytest.fixture
def load_candidate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201 - returns the loader
    """`load_candidate(body)` -> the imported module, TRITON_HEAD + body written to a real file."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    loaded: list[str] = []

    def load(body: str) -> ModuleType:
        name = f"kiln_integrity_cand_{uuid.uuid4().hex[:8]}"
        path = tmp_path / f"{name}.py"
        path.write_text(TRITON_HEAD + textwrap.dedent(body))
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        loaded.append(name)
        spec.loader.exec_module(mod)
        return mod

    yield load
    for name in loaded:
        sys.modules.pop(name, None)
