"""`import kiln` is the model runtime's front door: the names a bundle's user needs, imported lazily."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _probe(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_import_kiln_loads_no_torch_and_the_names_load_the_runtime() -> None:
    got = _probe("import json, sys, kiln; before = 'torch' in sys.modules; b = kiln.Bundle; e = kiln.BundleError;"
                 "print(json.dumps([before, b.__module__, issubclass(e, Exception), sorted(kiln.__all__)]))")
    assert got == [False, "kiln.evals.model.bundle", True, ["Bundle", "BundleError", "load"]]


def test_load_refuses_a_folder_that_is_not_a_bundle(tmp_path) -> None:
    import kiln

    with pytest.raises(kiln.BundleError, match="not a kiln bundle"):
        kiln.load(tmp_path)
    with pytest.raises(AttributeError, match="no attribute 'patch_everything'"):
        kiln.patch_everything  # noqa: B018
