"""The argreduce family (KernelBench level 1's 51 and 52: argmax, argmin over a middle dim): shrunk
copies and variants (last and first dim, keepdim, dim=None, torch.max/min's indices, ties) match
torch under the Triton interpreter; tiles shorter than the reduced dim carry the running best
across blocks; NaNs, infinities and every float dtype give torch's indices exactly; one case
passes kiln's real check; the unchanged files get a kernel that compiles for sm_90; what the
family does not cover is refused by name."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kiln.agents.base import CoderTask
from kiln.agents.builtin import BuiltinCoder
from kiln.agents.builtin.source import analyze, render

KB1 = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench_full" / "KernelBench" / "level1"
KB_FILES = ["51_Argmax_over_a_dimension.py", "52_Argmin_over_a_dimension.py"]
SHRINK = {"batch_size = 128": "batch_size = 4", "dim1 = 4096": "dim1 = 300", "dim2 = 4095": "dim2 = 33"}


def _shrunk(tmp: Path, name: str, sizes: dict[str, str] = SHRINK) -> Path:
    """KernelBench's file, the same code with its size constants shrunk for the interpreter."""
    src = (KB1 / name).read_text()
    for old, new in sizes.items():
        assert old in src
        src = src.replace(old, new)
    path = tmp / name
    path.write_text(f"# KernelBench level1/{name}: the same code, size constants shrunk for the Triton interpreter\n{src}")
    return path


TEMPLATE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return {expr}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
"""

VARIANTS = {  # name: (forward expression, get_inputs expression)
    "last_dim": ("torch.argmax(x, dim=-1)", "torch.rand(6, 3000)"),  # 16384-element tiles: one block
    "first_dim_keepdim": ("torch.argmin(x, dim=0, keepdim=True)", "torch.rand(300, 7, 5)"),
    "middle_ties": ("torch.argmax(x, dim=1)", "torch.randint(0, 3, (4, 300, 9)).float()"),
    "last_ties": ("x.argmin(2)", "torch.randint(0, 3, (4, 5, 700)).float()"),
    "flat": ("torch.argmax(x)", "torch.randint(0, 5, (20, 300)).float()"),
    "flat_keepdim": ("torch.argmin(x, keepdim=True)", "torch.rand(3, 40, 7)"),
    "max_indices": ("torch.max(x, 1)[1]", "torch.randint(0, 3, (5, 200, 3)).float()"),
    "min_indices_keepdim": ("torch.min(x, dim=2, keepdim=True).indices", "torch.rand(5, 3, 200)"),
    "prologue": ("torch.argmax(x * 2.0 - 1.0, dim=1)", "torch.rand(4, 300, 9)"),  # a pipeline: ew, then argmax
}


def _variant(tmp: Path, name: str) -> Path:
    expr, inputs = VARIANTS[name]
    path = tmp / f"{name}.py"
    path.write_text(TEMPLATE.format(expr=expr, inputs=inputs))
    return path


def test_argreduce_matches_the_reference(tmp_path: Path, gen, run_selfcheck) -> None:
    problems = [_shrunk(tmp_path, name) for name in KB_FILES] + [_variant(tmp_path, v) for v in VARIANTS]
    cands = [gen(p, tmp_path) for p in problems]
    for c in cands:
        src = c.read_text()
        assert '"family": "argreduce"' in src or "# argreduce " in src
        assert "dtype=torch.int64" in src and not re.search(r"torch\.(argmax|argmin|max|min)\(", src)
    assert analyze(problems[-1].read_text()).family == "pipeline"
    results = run_selfcheck(list(zip(problems, cands, strict=True)))
    assert all(r["ok"] for r in results), [r for r in results if not r["ok"]]


def test_small_tiles_carry_the_running_best_across_blocks(tmp_path: Path, run_selfcheck) -> None:
    """1024-element tiles: 16 steps of 64 lanes over KernelBench's middle dim of 300, and rows of
    3000 (the last block partial), with ties across block boundaries."""
    probs = [_shrunk(tmp_path, name) for name in KB_FILES]
    probs.append(tmp_path / "rows.py")
    probs[-1].write_text(TEMPLATE.format(expr="torch.argmin(x, -1)", inputs="torch.randint(0, 4, (3, 3000)).float()"))
    pairs = []
    for prob in probs:
        cand = tmp_path / f"cand_{prob.stem}.py"
        cand.write_text(render(analyze(prob.read_text()), {"block": 1024, "num_warps": 4}, set()))
        pairs.append((prob, cand))
    results = run_selfcheck(pairs)
    assert all(r["ok"] for r in results), [r for r in results if not r["ok"]]


EXACT = """
import importlib.util, sys, torch
bad = []
for path, fn, dim in zip(sys.argv[1::3], sys.argv[2::3], map(int, sys.argv[3::3])):
    spec = importlib.util.spec_from_file_location("cand", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    new = mod.ModelNew()
    torch.manual_seed(0)
    check(new, getattr(torch, fn), dim, bad)
print("BAD", bad)
"""
CHECK = """
import torch


def check(new, ref, dim, bad):
    for trial in range(4):
        x = torch.randint(0, 3, (3, 70, 5)).float()
        x[torch.rand(x.shape) < 0.03 * trial] = float("nan")
        if trial >= 2:
            x[torch.rand(x.shape) < 0.2] = float("inf")
            x[torch.rand(x.shape) < 0.2] = -float("inf")
        x[0, :, 0] = -float("inf")  # a lane of -inf only: index 0 (argmax)
        x[1, :, 1] = float("inf")  # of +inf only: index 0 (argmin)
        x[2, :, 2] = float("nan")  # all NaN: index 0
        for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
            got, want = new(x.to(dt)), ref(x.to(dt), dim=dim)
            if got.dtype != torch.int64 or not torch.equal(got, want):
                bad.append((ref.__name__, dim, trial, str(dt)))
"""


def test_nans_infinities_ties_and_dtypes_give_torchs_indices(tmp_path: Path) -> None:
    """The generated ModelNew called directly (interpreter, 16-element tiles: NaNs and ties in
    several blocks) against torch.argmax/argmin with torch.equal, for every float dtype."""
    argv = []
    for fn, dim in [("argmax", 1), ("argmin", 1), ("argmax", 2), ("argmin", 0)]:
        prob = tmp_path / f"{fn}{dim}.py"
        prob.write_text(TEMPLATE.format(expr=f"torch.{fn}(x, dim={dim})", inputs="torch.rand(3, 70, 5)"))
        cand = tmp_path / f"cand_{fn}{dim}.py"
        cand.write_text(render(analyze(prob.read_text()), {"block": 1024, "num_warps": 4}, set()).replace(
            "bn = min(1024,", "bn = min(16,").replace("min(64,", "min(4,").replace("1024 // bm", "16 // bm"))  # fmt: skip
        argv += [str(cand), fn, str(dim)]
    script = tmp_path / "exact.py"
    script.write_text(CHECK + EXACT)
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, str(script), *argv], env=env, capture_output=True, text=True, timeout=300)
    assert "BAD []" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]


def _kiln_check(tmp: Path, gen, monkeypatch):
    from kiln.tools.check import LocalEvaluator
    from kiln.tools.records import CheckOptions

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    prob = _shrunk(tmp, KB_FILES[1], {"batch_size = 128": "batch_size = 3", "dim1 = 4096": "dim1 = 129",
                                      "dim2 = 4095": "dim2 = 17"})  # fmt: skip
    return LocalEvaluator().check(prob, gen(prob, tmp), CheckOptions(device="cpu"))


def test_argmin_passes_kilns_correctness_check_exactly(tmp_path: Path, gen, monkeypatch) -> None:
    rec = _kiln_check(tmp_path, gen, monkeypatch)
    c = rec.correctness
    assert c is not None and c.passed and c.n_passed == c.n_trials > 0, rec.reasons
    assert {o.rule for t in c.trials for o in t.outputs} == {"exact"}  # int64 indices: compared exactly


def test_argmin_passes_kilns_whole_check(tmp_path: Path, gen, monkeypatch) -> None:
    """Integrity included: the decoy check poisons the int64 indices too (inside their range)."""
    rec = _kiln_check(tmp_path, gen, monkeypatch)
    assert rec.status == "ok" and rec.correct, rec.reasons


@pytest.mark.parametrize("name", KB_FILES)
def test_kernelbench_files_get_an_argreduce_kernel(name: str) -> None:
    src = (KB1 / name).read_text()
    reply = BuiltinCoder().write(CoderTask(mode="generate", problem_name=name[:-3], problem_src=src))
    assert reply.ok, reply.error
    assert reply.source is not None and '"family": "argreduce"' in reply.source
    fwd = reply.source.split("class ModelNew")[1]
    assert "_kiln_argreduce[grid](" in fwd and "torch.arg" not in fwd  # no torch compute in forward


def test_the_search_walks_the_argreduce_knobs() -> None:
    from kiln.agents.builtin import space
    from kiln.agents.builtin.judge import KNOB_CYCLE

    for dev in ("cpu", "cuda"):
        assert space.valid("argreduce", space.default("argreduce", "argreduce", dev))
    assert {k for k, _ in KNOB_CYCLE["argreduce"]} <= set(space.KNOBS["argreduce"])


SM90 = """
import sys
import triton
from triton.backends.compiler import GPUTarget

ns = {}
exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), ns)
fn, ptr = ns["_kiln_argreduce"], sys.argv[2]
for bm, bn in ((64, 64), (1, 4096)):  # lanes across the contiguous dim; one row per program (K == 1)
    consts = {"ACC": triton.language.float64 if ptr == "*fp64" else triton.language.float32, "BLOCK_M": bm,
              "BLOCK_N": bn}
    sig = {"out_ptr": "*i64", "p0": ptr, "LANES": "i32", "N": "i32", "K": "i32"} | dict.fromkeys(consts, "constexpr")
    attrs = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]}
    src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs)
    ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8}).asm["ptx"]
    assert "ld.global" in ptx and "st.global" in ptx, (bm, bn)
print("COMPILED")
"""


@pytest.mark.parametrize("ptr", ["*fp32", "*bf16", "*fp64"])
def test_the_kernel_compiles_for_sm90(tmp_path: Path, ptr: str) -> None:
    """Triton's real compiler for sm_90, in a fresh process: an interpreter run earlier in the same
    process (another test's) leaves triton.language patched, and real compiles then fail."""
    path = tmp_path / "cand.py"
    path.write_text(BuiltinCoder().write(CoderTask(mode="generate", problem_name="p",
                                                   problem_src=(KB1 / KB_FILES[0]).read_text())).source or "")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"TRITON_CACHE_DIR": str(tmp_path / "c")}
    proc = subprocess.run([sys.executable, "-c", SM90, str(path), ptr], env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert "COMPILED" in proc.stdout, proc.stderr[-3000:]


REFUSED = {
    "torch.argmax(x, 1) + 1": "an op on argmax's int64 indices",
    "torch.max(x, dim=1)[0] * torch.max(x, dim=1)[1]": "an op on torch.max(x, dim)'s int64 indices",
    "torch.argmax(x.sum(), 0)": "argmax of a 0-D tensor",
}


@pytest.mark.parametrize("expr", sorted(REFUSED))
def test_what_the_family_does_not_cover_is_refused_by_name(expr: str) -> None:
    src = TEMPLATE.format(expr=expr, inputs="torch.rand(4, 5, 6)")
    reply = BuiltinCoder().write(CoderTask(mode="generate", problem_name="p", problem_src=src))
    assert not reply.ok and reply.source is None
    assert REFUSED[expr] in (reply.error or ""), reply.error
