"""Split-K in the matmul template: where the output's tiles leave most SMs idle and K is long (a
GEMV, KernelBench's 256x256 GEMM over K = 524288, a small-batch Linear), K is cut into slices whose
partial sums a second kernel adds in slice order before the fused epilogue. Under the interpreter
kiln writes no split (no SMs to fill), so these kernels are written for a 64-SM GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import triton

from kiln.agents.builtin import space
from kiln.agents.builtin.gen_matmul import TILE_HELPER
from kiln.agents.builtin.source import analyze, render

PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self{init_args}):
        super().__init__()
{init_body}

    def forward(self, {args}):
        return {expr}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return [{init_inputs}]
"""
CASES = {
    "gemv": dict(args="a, b", expr="torch.matmul(a, b)", inputs="torch.randn(64, 4096), torch.randn(4096, 1)"),
    "large_k": dict(args="a, b", expr="torch.matmul(a, b)", inputs="torch.randn(32, 8192), torch.randn(8192, 48)"),
    "linear_relu": dict(init_args=", k, n", init_body="        self.fc = nn.Linear(k, n)", args="x",
                        expr="torch.relu(self.fc(x)) + 0.5", inputs="torch.randn(8, 4096)", init_inputs="4096, 48"),
    "bmm": dict(args="a, b", expr="torch.bmm(a, b)", inputs="torch.randn(2, 16, 2048), torch.randn(2, 2048, 16)"),
    "vecmat": dict(init_args=", k, n", init_body="        self.fc = nn.Linear(k, n)", args="x",
                   expr="torch.sigmoid(self.fc(x))", inputs="torch.randn(1, 3000)", init_inputs="3000, 40"),
}
GEMV = {"gemv", "vecmat"}  # N == 1 (or M == 1) with K contiguous: the GEMV kernel, not tl.dot
RUN = """
import importlib.util, json, sys, torch
out = {}
for prob_path, cand_path in zip(sys.argv[1::2], sys.argv[2::2]):
    mods = []
    for name, path in (("prob", prob_path), ("cand", cand_path)):
        spec = importlib.util.spec_from_file_location(name, path)
        mods.append(importlib.util.module_from_spec(spec))
        spec.loader.exec_module(mods[-1])
    prob, cand = mods
    torch.manual_seed(0)
    ref = prob.Model(*prob.get_init_inputs())
    new = cand.ModelNew(*prob.get_init_inputs())
    new.load_state_dict(ref.state_dict())
    launches = {"_kiln_mm_reduce": [], "_kiln_gemv": [], "_kiln_mm": []}
    b_strides = []

    class Count:
        def __init__(self, name):
            self.name, self.launch = name, getattr(cand, name)

        def __getitem__(self, grid):
            launches[self.name].append(grid)
            if self.name == "_kiln_mm":  # B's strides as the GEMM reads it
                return lambda *a, **k: (b_strides.append(list(a[1].stride())), self.launch[grid](*a, **k))[1]
            return self.launch[grid]

    for name in launches:
        setattr(cand, name, Count(name))
    x = prob.get_inputs()
    with torch.no_grad():
        got, want = new(*x), ref(*[t.double() for t in x]) if not list(ref.parameters()) else ref.double()(*[t.double() for t in x])
    err = float((got.double() - want).abs().max() / want.abs().max())
    out[prob_path] = {"reduces": len(launches["_kiln_mm_reduce"]), "gemv": launches["_kiln_gemv"],
                      "mm": len(launches["_kiln_mm"]), "b_strides": b_strides, "rel_err": err, "shape_ok": list(got.shape) == list(want.shape)}
print(json.dumps(out))
"""


def test_split_k_slices_add_up_with_the_epilogue(tmp_path: Path) -> None:
    pairs = []
    for name, case in CASES.items():
        prob = tmp_path / f"{name}.py"
        prob.write_text(PROBLEM.format(**({"init_args": "", "init_body": "        pass", "init_inputs": ""} | case)))
        an = analyze(prob.read_text())
        assert an.family == "matmul", (name, an.family)
        cand = tmp_path / f"cand_{name}.py"
        src = render(an, space.default("matmul", "matmul", "cpu") | {"sms": 64}, set())
        assert "def _kiln_mm_reduce(" in src and "for s in range(0, SPLIT_K)" in src
        cand.write_text(src)
        pairs += [str(prob), str(cand)]
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-c", RUN, *pairs], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    for name in CASES:
        r = res[str(tmp_path / f"{name}.py")]
        assert r["shape_ok"] and r["reduces"] == 1, (name, r)  # split, then one reduce launch
        assert r["rel_err"] < 1e-5, (name, r)
        if name in GEMV:  # 64 SMs x 8 programs over 8 (gemv) / 5 (vecmat) row blocks, each slice >= 4 x 512 of K
            assert r["mm"] == 0 and r["gemv"] == [[8, 2] if name == "gemv" else [5, 2]], (name, r)
        else:
            assert r["mm"] == 1 and not r["gemv"], (name, r)


def test_no_split_where_the_tiles_fill_the_gpu(tmp_path: Path) -> None:
    """A 4096^2 output is 1024 tiles of 128x128 on a 132-SM H200: no split; KernelBench's 256^2 output
    over K = 524288 is 4 tiles: 66 slices, two programs per SM."""
    prob = tmp_path / "square.py"
    prob.write_text(PROBLEM.format(init_args="", init_body="        pass", init_inputs="", args="a, b",
                                   expr="torch.matmul(a, b)", inputs="torch.randn(4096, 64), torch.randn(64, 4096)"))
    src = render(analyze(prob.read_text()), space.default("matmul", "matmul", "cuda") | {"sms": 132}, set())
    ns: dict = {}
    exec(TILE_HELPER, ns)
    assert (ns["_kiln_tile"](4096, 128), ns["_kiln_tile"](1, 128), ns["_kiln_tile"](48, 64)) == (128, 16, 64)
    line = next(ln.strip() for ln in src.splitlines() if ln.strip().startswith("split = max(") and "tiles * nb" in ln)
    scope = {"triton": triton, "K": 64, "bk": 64, "tiles": 1024, "nb": 1}
    exec(line, scope)
    assert scope["split"] == 1
    scope |= {"K": 524288, "tiles": 4}
    exec(line, scope)
    assert scope["split"] == 66  # 2 x 132 SMs over 4 tiles


def test_fp32_gemm_reads_b_k_major(tmp_path: Path) -> None:
    """TF32 tensor cores want B K-major (on the H200 a 4096^3 fp32 GEMM took 4.6 ms with a row-major B,
    2.2 ms with it K-major): a row-major B is copied K-major where M is large enough to pay for the
    copy; a small M, or a split-K GEMM (few tiles streaming a long K), reads it as it is."""
    pairs = []
    for name, m, k, sms in (("square", 256, 96, 0), ("short", 64, 96, 0), ("split", 256, 8192, 64)):
        prob = tmp_path / f"{name}.py"
        prob.write_text(PROBLEM.format(init_args="", init_body="        pass", init_inputs="", args="a, b",
                                       expr="torch.matmul(a, b)", inputs=f"torch.randn({m}, {k}), torch.randn({k}, 80)"))
        cand = tmp_path / f"cand_{name}.py"
        cand.write_text(render(analyze(prob.read_text()), space.default("matmul", "matmul", "cpu") | {"sms": sms},
                               set()))
        pairs += [str(prob), str(cand)]
    proc = subprocess.run([sys.executable, "-c", RUN, *pairs], env=dict(os.environ, TRITON_INTERPRET="1"),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    square, short, split = res[pairs[0]], res[pairs[2]], res[pairs[4]]
    assert square["b_strides"] == [[1, 96]] and square["rel_err"] < 1e-5, square
    assert short["b_strides"] == [[80, 1]] and short["rel_err"] < 1e-5, short
    assert split["reduces"] == 1 and split["b_strides"] == [[80, 1]] and split["rel_err"] < 1e-5, split  # split-K: as given
