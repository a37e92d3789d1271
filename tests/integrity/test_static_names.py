"""The generated allowlist tables (tools/integrity/static_names.py) match the installed torch and
Triton: every listed name exists and is not a module, nothing dangerous slipped in, and the
generator reproduces the file (regenerate with tests/integrity/regen_static_names.py)."""

from __future__ import annotations

import importlib
import types
from pathlib import Path

import pytest
import torch
import triton

from kiln.tools.integrity.static_names import NAMES
from kiln.tools.integrity.static_policy import ALLOWED

from . import regen_static_names as regen


@pytest.mark.parametrize("module", sorted(NAMES))
def test_every_listed_name_exists_and_is_not_a_module(module: str) -> None:
    mod = importlib.import_module(module)
    missing = sorted(n for n in NAMES[module] if not hasattr(mod, n))
    modules = sorted(n for n in NAMES[module] if isinstance(getattr(mod, n, None), types.ModuleType))
    assert missing == [] and modules == []


def test_the_tables_hold_no_way_out() -> None:
    for name in ("sys", "os", "ops", "library", "backends", "profiler", "load", "save", "from_file", "from_numpy",
                 "manual_seed", "compile", "jit", "Generator", "Stream", "Event", "set_default_dtype", "utils"):
        assert name not in NAMES["torch"], name
    assert not any(n.startswith("_") for names in NAMES.values() for n in names)
    assert "np" not in NAMES["torch.nn.functional"] and "pkgutil" not in ALLOWED["triton.language.extra"]


def test_every_allowed_submodule_is_reachable_from_its_parent() -> None:
    for module in ALLOWED:
        if "." in module:
            parent, name = module.rsplit(".", 1)
            assert name in ALLOWED[parent], module


@pytest.mark.skipif(not NAMES, reason="no table")
def test_the_generator_reproduces_the_table() -> None:
    from kiln.tools.integrity import static_names

    text = Path(static_names.__file__).read_text(encoding="utf-8")
    if f"torch {torch.__version__}" not in text or f"Triton\n{triton.__version__}" not in text:
        pytest.skip("generated from other torch/Triton versions")
    assert regen.render(regen.tables()) == text
