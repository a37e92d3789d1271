"""The API-set catalogue: built-in families, user files (TOML and JSON), one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kiln.agents.curriculum.catalogue import KINDS, builtin_catalogue, load_catalogue
from kiln.tools.errors import KilnInputError

FAMILIES = {"elementwise", "reduction", "normalization", "softmax", "matmul", "convolution", "pooling",
            "indexing", "attention", "scan"}

USER_TOML = """
[[family]]
name = "shrink"
description = "shrinkage activations"
  [[family.op]]
  name = "hardshrink"
  kind = "pointwise"
  expr = "F.hardshrink({x}, lambd={lambd})"
  args = { lambd = [0.3, 0.5] }
"""


def test_builtin_catalogue_has_every_family_with_argument_spaces() -> None:
    cat = builtin_catalogue()
    assert set(cat.families) == FAMILIES
    ops = cat.ops()
    assert len({o.name for o in ops}) == len(ops)
    assert {o.kind for o in ops} == set(KINDS)
    assert cat.op("conv2d").args["kernel_size"] == [1, 3]
    assert all(o.family for o in ops)


def test_user_families_from_toml_and_json(tmp_path: Path) -> None:
    toml = tmp_path / "shrink.toml"
    toml.write_text(USER_TOML)
    js = tmp_path / "more.json"
    js.write_text(json.dumps({"family": [{"name": "trig", "op": [
        {"name": "sin", "kind": "pointwise", "expr": "torch.sin({x})"}]}]}))
    cat = load_catalogue([toml, js])
    assert {"shrink", "trig"} <= set(cat.families)
    assert cat.op("hardshrink").family == "shrink"
    assert list(cat.restrict(["trig"]).families) == ["trig"]


@pytest.mark.parametrize(("body", "message"), [
    ('[[family]]\nname = "f"\n[[family.op]]\nname = "a"\nkind = "blend"\nexpr = "{x}"\n', "kind"),
    ('[[family]]\nname = "f"\n[[family.op]]\nname = "a"\nkind = "pointwise"\nexpr = "{x} + {zeta}"\n',
     "unknown placeholder {zeta}"),
    ('[[family]]\nname = "f"\n[[family.op]]\nname = "relu"\nkind = "pointwise"\nexpr = "{x}"\n', "already defined"),
    ('[[family]]\nname = "f"\n[[family.op]]\nname = "a"\nkind = "binary"\nexpr = "{x} * 2"\n', "must use {y}"),
    ('[[family]]\nname = "f"\n[[family.op]]\nname = "a"\nkind = "reduce"\nexpr = "{x}.sum()"\n', "needs the arg `dim`"),
    ("[[family]\n", "not valid TOML"),
    ('[[family]]\nname = "f"\nop = []\n', "family #1"),
])
def test_bad_family_files_fail_in_one_line(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(body)
    with pytest.raises(KilnInputError) as err:
        load_catalogue([path])
    assert message in str(err.value) and "\n" not in str(err.value) and "bad.toml" in str(err.value)


def test_unknown_family_lists_the_valid_ones() -> None:
    with pytest.raises(KilnInputError, match="unknown family warp; valid: elementwise"):
        builtin_catalogue().restrict(["warp"])


def test_cli_reports_a_bad_catalogue_in_one_line_and_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    proc = subprocess.run([sys.executable, "-m", "kiln.evals.cli", "curriculum", "--catalogue", str(bad),
                           "--device", "cpu", "--out", str(tmp_path / "run")], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"kiln: error: {bad}: not valid JSON: "
                                                + proc.stderr.split("not valid JSON: ", 1)[1].strip()]
    assert "Traceback" not in proc.stderr
