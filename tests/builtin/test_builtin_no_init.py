"""A Model without its own `__init__` (nn.Module's is inherited: no parameters, no arguments) is a
valid problem; the built-in Coder writes a kernel for it (kiln model's overhead probe is one, and
failed on the H200 with "Model has no `__init__` method", 2026-12-03)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln.agents.builtin.problem import Unsupported, init_source

NO_INIT = """import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x):
        return F.silu(x) * 2.0


def get_inputs():
    return [torch.randn(64, 96)]


def get_init_inputs():
    return []
"""


def test_a_model_without_init_gets_nn_modules_own(tmp_path: Path, gen, run_selfcheck) -> None:
    assert init_source(NO_INIT) == ("self", "super().__init__()")
    prob = tmp_path / "silu_no_init.py"
    prob.write_text(NO_INIT)
    cand = gen(prob, tmp_path)
    assert "def __init__(self" in cand.read_text()
    [res] = run_selfcheck([(prob, cand)])
    assert res["ok"], res


def test_an_init_inherited_from_another_class_is_refused() -> None:
    src = NO_INIT.replace("class Model(nn.Module):", "class Base(nn.Module):\n    def __init__(self):\n"
                          "        super().__init__()\n        self.w = nn.Parameter(torch.ones(96))\n\n\n"
                          "class Model(Base):")
    with pytest.raises(Unsupported, match="no `__init__`"):
        init_source(src)
