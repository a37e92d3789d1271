"""kiln's own process checks a candidate without importing torch: the workers hold every tensor and the
reference's worker judges outputs. On the H200 a fresh `kiln check` on the resident fork server waited
for torch's import inside its compile stage (3.6 s there against 1.0 s with a per-process server,
2026-12-07), because the parent sized an output with torch's dtypes. These tests run checks in a fresh
interpreter where importing torch raises, so any torch import that creeps back into the parent's path
fails them, whichever module it comes through."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kiln.tools.check.messages import ITEM_BYTES

DATA = Path(__file__).parent / "data"
NO_TORCH = """
import importlib.abc, importlib.machinery, json, sys

class Refuse(importlib.abc.Loader):
    def create_module(self, spec):
        raise ImportError("kiln's own process imported torch during a check")

    def exec_module(self, module):
        raise ImportError("kiln's own process imported torch during a check")

class NoTorch(importlib.abc.MetaPathFinder):  # finding torch (its files, its version) is fine; loading it is not
    def find_spec(self, name, path=None, target=None):
        if name != "torch" and not name.startswith("torch."):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None:
            spec.loader = Refuse()
        return spec

sys.meta_path.insert(0, NoTorch())
"""
TIMED_CHECK = NO_TORCH + """
from kiln.tools.check import check
from kiln.tools.records import CheckOptions
if sys.argv[3] == "cuda":  # the GPU's own paths: NVML's environment record, the GPU lock, the peaks cache
    o = CheckOptions(device="cuda", trials=1, timeout_s=300, baselines=["eager"])
else:
    o = CheckOptions(device="cpu", trials=1, timeout_s=120, timing_timeout_s=20.0, time_on_cpu=True, baselines=["eager"])
rec = check(sys.argv[1], sys.argv[2], o)
print(json.dumps({"status": rec.status, "reasons": rec.reasons, "measured": bool(rec.timing and rec.timing.measured),
                  "torch": "torch" in sys.modules, "tail": rec.stderr_tail[-800:] if rec.stderr_tail else ""}))
"""
CLI_CHECK = NO_TORCH + """
from kiln.evals.cli import main
sys.argv = ["kiln", "check", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "torch": "torch" in sys.modules}))
"""


def _run(script: str, *args: str) -> dict:
    env = {**os.environ, "TRITON_INTERPRET": "0" if "cuda" in args else "1"}
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=240, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_timed_check_runs_whole_with_torch_unimportable_in_kilns_process() -> None:
    got = _run(TIMED_CHECK, str(DATA / "add_problem.py"), str(DATA / "add_triton.py"), "cpu")
    assert got["status"] == "ok", got["tail"] or got
    assert got["measured"] and not got["torch"], got


@pytest.mark.gpu
def test_a_timed_gpu_check_runs_whole_with_torch_unimportable_in_kilns_process() -> None:
    got = _run(TIMED_CHECK, str(DATA / "add_problem.py"), str(DATA / "add_triton.py"), "cuda")
    assert got["status"] == "ok", got["tail"] or got
    assert got["measured"] and not got["torch"], got


def test_the_cli_check_and_its_failure_paths_import_no_torch_either(tmp_path: Path) -> None:
    """A passing check, and a wrong kernel (the mismatch is worded for the Coder in kiln's process)."""
    good = _run(CLI_CHECK, str(DATA / "add_problem.py"), str(DATA / "add_triton.py"), "--device", "cpu",
                "--json", str(tmp_path / "good.json"))
    assert good == {"code": 0, "torch": False}
    wrong = tmp_path / "wrong.py"
    source = (DATA / "add_triton.py").read_text()
    assert " + tl.load(y_ptr" in source
    wrong.write_text(source.replace(" + tl.load(y_ptr", " - tl.load(y_ptr"))
    bad = _run(CLI_CHECK, str(DATA / "add_problem.py"), str(wrong), "--device", "cpu", "--json", str(tmp_path / "bad.json"))
    rec = json.loads((tmp_path / "bad.json").read_text())
    assert bad["code"] != 0 and not bad["torch"]
    assert rec["status"] == "incorrect" and "max abs err" in rec["correctness"]["first_failure"], rec["status"]


def test_the_parents_dtype_sizes_are_torchs() -> None:
    import torch

    from kiln.tools.check.outputs import DTYPES

    assert set(ITEM_BYTES) == set(DTYPES)
    assert all(ITEM_BYTES[name] == torch.empty((), dtype=dt).element_size() for name, dt in DTYPES.items())


def test_library_versions_are_read_without_importing_them() -> None:
    script = """
import json, sys
from kiln.tools import gpuenv
v = gpuenv.library_versions()
print(json.dumps({**v, "imported": "torch" in sys.modules or "triton" in sys.modules}))
"""
    got = json.loads(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                                    check=True).stdout)
    import torch
    import triton

    assert got == {"torch": torch.__version__, "cuda": torch.version.cuda, "triton": triton.__version__,
                   "imported": False}
