"""The built-in policies on model ops: group norm (+ epilogue), adaptive average pooling to 1.
Kernels are checked against PyTorch under Triton's interpreter (a subprocess) and compiled for the
H200 (sm_90) with Triton's real compiler, which the interpreter does not exercise."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kiln.agents.base import CoderTask
from kiln.agents.builtin import BuiltinCoder
from tests.model.conftest import REPO, interp_env

PROBLEMS = Path(__file__).parent / "problems"
CASES = {"group_norm_silu": "gnorm", "group_norm_residual": "gnorm", "adaptive_pool": "row",
         "batch_norm_relu": "elementwise", "group_norm_silu_rows": "gnorm"}


def _generate(name: str, out: Path, device: str = "cpu") -> Path:
    reply = BuiltinCoder(device=device).write(CoderTask(mode="generate", problem_name=name,
                                                         problem_src=(PROBLEMS / f"{name}.py").read_text()))
    assert reply.ok, reply.error
    path = out / f"cand_{name}_{device}.py"
    path.write_text(reply.source or "")
    return path


def test_generated_kernels_match_torch(tmp_path: Path) -> None:
    pairs = [str(p) for name in CASES for p in (PROBLEMS / f"{name}.py", _generate(name, tmp_path))]
    proc = subprocess.run([sys.executable, "-m", "kiln.agents.builtin.selfcheck", *pairs], env=interp_env(),
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    results = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert len(results) == len(CASES), proc.stderr[-2000:]
    for r in results:
        assert r["ok"], r


@pytest.mark.parametrize("name", ["group_norm_silu", "group_norm_residual"])
@pytest.mark.parametrize("ptr", ["*fp32", "*bf16"])
def test_group_norm_kernels_compile_for_sm90(name: str, ptr: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    path = _generate(name, tmp_path, "cuda")
    spec = importlib.util.spec_from_file_location(f"gn_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    consts = {"BLOCK": 2048, "SP": 16}
    for kname in ("_kiln_gn_onepass", "_kiln_gn_stats", "_kiln_gn_apply", "_kiln_gn_rows"):
        fn = getattr(mod, kname)
        sig = {a: "constexpr" if a in consts else ("*fp32" if a == "ws_ptr" else ptr) if a.endswith("_ptr") or
               (a[:1] == "p" and a[1:].isdigit()) else ("fp32" if a == "eps" else "i32") for a in fn.arg_names}
        src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs={a: v for a, v in consts.items()
                                                                          if a in fn.arg_names})
        ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8}).asm["ptx"]
        assert "ld.global" in ptx and ("st.global" in ptx)


ROWS_CHECK = """
import importlib.util, json, sys, torch
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
prob, cand = load(sys.argv[1], "prob"), load(sys.argv[2], "cand")
class Refuse:
    def __getitem__(self, grid):
        raise AssertionError("the refused path ran")
if sys.argv[3] == "rows":
    cand._kiln_gn_stats = cand._kiln_gn_apply = Refuse()
else:
    cand._kiln_gn_rows = Refuse()
torch.manual_seed(0)
ref = prob.Model(*prob.get_init_inputs())
new = cand.ModelNew(*prob.get_init_inputs())
new.load_state_dict(ref.state_dict())
x = prob.get_inputs()[0]
with torch.no_grad():
    err = float((new(x) - ref(x)).abs().max())
print(json.dumps({"err": err}))
"""


def test_few_long_rows_take_one_launch(tmp_path: Path) -> None:
    """1 sample x 2 groups of 10240 (fewer rows than half the SMs): the one-launch row kernel walks each
    row in two chunks (Welford per lane, then Chan across lanes) and matches torch."""
    cand = _generate("group_norm_silu_rows", tmp_path)
    assert "_kiln_gn_rows[(rows,)]" in cand.read_text()
    proc = subprocess.run([sys.executable, "-c", ROWS_CHECK, str(PROBLEMS / "group_norm_silu_rows.py"), str(cand),
                           "rows"], env=interp_env(), cwd=REPO, capture_output=True, text=True, timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stderr[-2000:]
    assert json.loads(lines[-1])["err"] < 1e-4


def test_few_rows_of_many_elements_in_all_take_the_split_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ROWS_MAX_ELEMS elements in all, few rows still go to the split path, whose GPU time wins
    there over its second launch (H200: 2x320x128x128, 104 us a call in one launch, 57 split)."""
    from kiln.agents.builtin import gen_groupnorm_rows

    monkeypatch.setattr(gen_groupnorm_rows, "ROWS_MAX_ELEMS", 10000)  # the problem's 2 x 10240 is past it
    cand = _generate("group_norm_silu_rows", tmp_path)
    proc = subprocess.run([sys.executable, "-c", ROWS_CHECK, str(PROBLEMS / "group_norm_silu_rows.py"), str(cand),
                           "split"], env=interp_env(), cwd=REPO, capture_output=True, text=True, timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stderr[-2000:]
    assert json.loads(lines[-1])["err"] < 1e-4
