"""Problem and candidate validation by AST (no candidate code runs), and the CLI's one-line errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kiln.tools.errors import KilnInputError
from kiln.tools.problem import load_candidate, load_problem

DATA = Path(__file__).parent / "data"
PROBLEM = DATA / "add_problem.py"


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_problem_signatures_are_read() -> None:
    info = load_problem(PROBLEM)
    assert info.forward.names == ["x", "y"] and info.init.names == []


@pytest.mark.parametrize("text, expected", [
    ("import torch\nclass Model:\n    def forward(self, x):\n        return x\ndef get_inputs():\n    return []\n",
     "no function `get_init_inputs`"),
    ("def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n", "no class `Model`"),
    ("class Model:\n    def forward(self, x)\n        return x\n", ":2: syntax error"),
])
def test_bad_problem_is_one_line(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(KilnInputError, match=expected) as err:
        load_problem(write(tmp_path, "p.py", text))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("text, expected", [
    ("import torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x, y):\n        return x\n",
     "no class `ModelNew`"),
    ("import torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n",
     r"py:3: ModelNew.forward\(self, x\) does not match Model.forward\(self, x, y\)"),
    ("import torch.nn as nn\nclass ModelNew(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
     "    def forward(self, x, y):\n        return x\n", r"ModelNew.__init__\(self, n\) does not match"),
    ("import torch.nn as nn\nclass ModelNew(nn.Module):\n    pass\n", "ModelNew defines no forward"),
    ("class ModelNew(:\n", ":1: syntax error in candidate"),
])
def test_bad_candidate_is_one_line(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(KilnInputError, match=expected):
        load_candidate(write(tmp_path, "cand.py", text), load_problem(PROBLEM))


def test_compatible_candidates_pass(tmp_path: Path) -> None:
    prob = load_problem(PROBLEM)
    ok = [
        "import torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, a, b):\n        return a\n",
        "import torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, *args):\n        return args[0]\n",
        "import torch.nn as nn\nclass Base(nn.Module):\n    def forward(self, x, y, z=None):\n        return x\n"
        "class ModelNew(Base):\n    pass\n",
        "from somewhere import Thing\nModelNew = Thing\n",
    ]
    for i, text in enumerate(ok):
        load_candidate(write(tmp_path, f"c{i}.py", text), prob)


def test_cli_bad_inputs_exit_2_with_one_line(tmp_path: Path, run_cli) -> None:
    cand = write(tmp_path, "cand.py", "import torch.nn as nn\nclass ModelNew(nn.Module):\n"
                                      "    def forward(self, x):\n        return x\n")
    cases = [
        ([str(tmp_path / "missing.py"), str(cand)], "problem file not found"),
        ([str(PROBLEM), str(DATA / "add_triton.py"), "--dtype", "fp64"], "--dtype must be one of"),
        ([str(DATA / "bad_inputs_problem.py"), str(DATA / "add_triton.py"), "--device", "cpu"],
         "get_inputs()[1] is a str; inputs must be tensors, numbers or tuples of numbers"),
    ]
    for args, expected in cases:
        res = run_cli("check", *args)
        assert res.returncode == 2, (args, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], res.stderr
        assert "Traceback" not in res.stderr + res.stdout


def test_a_broken_candidate_is_a_compile_error_verdict_with_a_record(tmp_path: Path, run_cli) -> None:
    """A candidate kiln can't load is the candidate's failure (exit 1, JSON written), not bad input."""
    cand = write(tmp_path, "cand.py", "import torch.nn as nn\nclass ModelNew(nn.Module):\n"
                                      "    def forward(self, x):\n        return x\n")
    out = tmp_path / "rec.json"
    res = run_cli("check", str(PROBLEM), str(cand), "--json", str(out))
    assert res.returncode == 1 and "Traceback" not in res.stderr + res.stdout
    rec = json.loads(out.read_text())
    assert rec["status"] == "compile_error" and "does not match Model.forward" in rec["reasons"][0]


def test_inputs_may_be_tuples_of_numbers_but_nothing_else() -> None:
    from kiln.tools.inputs import InputsError, fingerprint, validate

    assert validate([(64, 256), [1, 2.5], 3], "get_init_inputs()") == [(64, 256), [1, 2.5], 3]
    assert fingerprint([(64, 256), 3]) == [64.0, 256.0, 3.0]
    for bad, where in [([(64, "a")], "[0] is a tuple"), ([{"a": 1}], "[0] is a dict")]:
        with pytest.raises(InputsError, match=re.escape(where)):
            validate(bad, "get_init_inputs()")
