"""The generated allowlist tables (tools/integrity/static_names.py) match the installed torch and
Triton: every listed name exists and is not a module, nothing dangerous slipped in, and the
generator reproduces the file (regenerate with tests/integrity/regen_static_names.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kiln.tools.integrity.static_names import NAMES
from kiln.tools.integrity.static_policy import ALLOWED

REGEN = Path(__file__).with_name("regen_static_names.py")


def test_the_table_matches_the_installed_packages() -> None:
    # In a subprocess: importing Triton here (without TRITON_INTERPRET) would turn its language's
    # @jit helpers (tl.max, tl.sum) into compiled-only functions for the interpreter tests after it.
    proc = subprocess.run([sys.executable, str(REGEN), "--check"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


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
