"""Group norm (+ SiLU) at the sizes diffusion UNets and ResNets use: the built-in kernel's paths against
eager and torch.compile, on the GPU (issue 23's model-op target: fused group_norm + SiLU >= 1.7x eager).

    . bench/device_env.sh && python3 bench/gn_speed.py [--json FILE]

Each row is one (shape, dtype, variant): `host` is triton.testing.do_bench (a call as a caller sees it,
launches and allocations included, L2 flushed between calls), `graph` is do_bench_cudagraph (the GPU's
own time for the same call). Variants of the built-in kernel: the dispatch it writes (`kiln`), and the
same kernel forced onto each path (`rows`: one program per (sample, group); `split`: stats and apply
over slices of each group), at several block sizes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.GroupNorm({groups}, {ch}, eps=1e-6)

    def forward(self, x):
        return {expr}


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return []
"""
CASES = [  # (shape, dtype, SiLU fused): SD UNet stages (batch 2, 32 groups), a ResNet-sized one
    ((2, 320, 64, 64), "fp32", True), ((2, 320, 64, 64), "fp32", False), ((2, 320, 64, 64), "bf16", True),
    ((2, 640, 32, 32), "fp32", True), ((2, 1280, 16, 16), "fp32", True), ((2, 320, 128, 128), "fp32", True),
    ((32, 256, 56, 56), "fp32", True),
]


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


VARIANTS = [("kiln", {}, None)] + [
    (f"rows b{b} w{w}", {"block": b, "num_warps": w}, "rows") for b, w in ((4096, 16), (8192, 16), (2048, 8))] + [
    (f"split b{b} w{w}", {"block": b, "num_warps": w}, "split") for b, w in ((1024, 4), (2048, 4), (4096, 8), (8192, 8))]


def variants(an, ref_mod, tmp: Path, tag0: str) -> dict:
    """eager, torch.compile, and the built-in kernel: its own dispatch, then forced onto each path."""
    import torch

    from kiln.agents.builtin import space
    from kiln.agents.builtin.source import render

    out = {"eager": ref_mod, "compile": torch.compile(ref_mod)}
    base = space.default("gnorm", "gnorm", "cuda")
    for k, (tag, knobs, force) in enumerate(VARIANTS):
        mod = load_src(tmp, f"{tag0}_{k}", render(an, base | knobs, set()))
        if force == "rows":
            mod._kiln_sm_count = lambda dev: 10**6  # every row count "fits": the one-launch kernel
        elif force == "split":
            mod._kiln_sm_count = lambda dev: 0  # never: the slices
        m = mod.ModelNew().to(next(ref_mod.parameters()).device, next(ref_mod.parameters()).dtype)
        m.load_state_dict(ref_mod.state_dict())
        out[tag] = m
    return out


def cell(v: dict, k: str) -> str:
    return f"{v[k]['host_us']} / {v[k]['graph_us']}"


def main() -> int:
    import torch
    import triton.testing as tt

    from kiln.agents.builtin.source import analyze

    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path)
    ap.add_argument("--check", action="store_true", help="only run `kiln check` on the first case (built-in kernel)")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    if a.check:
        check(tmp)
        return 0
    rows = []
    for c, (shape, dtype, fused) in enumerate(CASES):
        dt = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
        expr = "torch.nn.functional.silu(self.norm(x))" if fused else "self.norm(x)"
        src = PROBLEM.format(groups=32, ch=shape[1], expr=expr, shape=", ".join(map(str, shape)))
        torch.manual_seed(0)
        x = torch.randn(shape, device="cuda", dtype=dt)
        ref_mod = load_src(tmp, f"p{c}", src).Model().cuda().to(dt)
        with torch.no_grad():
            want = ref_mod(x)
            for tag, fn in variants(analyze(src), ref_mod, tmp, f"c{c}").items():
                err = float((fn(x).float() - want.float()).abs().max())
                host = tt.do_bench(lambda fn=fn, x=x: fn(x), warmup=25, rep=100)
                graph = tt.do_bench_cudagraph(lambda fn=fn, x=x: fn(x), rep=100)
                row = {"dtype": dtype, "shape": list(shape), "fused_silu": fused, "variant": tag,
                       "host_us": round(host * 1e3, 1), "graph_us": round(graph * 1e3, 1), "max_abs_err": err}
                rows.append(row)
                print(json.dumps(row), flush=True)
    by: dict = {}
    for r in rows:
        by.setdefault((r["dtype"], tuple(r["shape"]), r["fused_silu"]), {})[r["variant"]] = r
    print("\n| dtype | shape | +silu | eager host / graph us | compile | kiln | best rows | best split |")
    print("|---|---|---|---|---|---|---|---|")
    for (dt, sh, fu), v in by.items():
        best = {p: min((k for k in v if k.startswith(p)), key=lambda k, v=v: v[k]["graph_us"]) for p in ("rows", "split")}
        print(f"| {dt} | {'x'.join(map(str, sh))} | {fu} | {cell(v, 'eager')} | {cell(v, 'compile')} | "
              f"{cell(v, 'kiln')} | {best['rows']}: {cell(v, best['rows'])} | {best['split']}: {cell(v, best['split'])} |")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


def check(tmp: Path) -> None:
    """`kiln check` of the first case's built-in kernel: where its timing record puts the time (the
    laps, the refresh and commit steps of each worker, the charge)."""
    import subprocess

    from kiln.agents.builtin import space
    from kiln.agents.builtin.source import analyze, render

    shape, _, _ = CASES[0]
    src = PROBLEM.format(groups=32, ch=shape[1], expr="torch.nn.functional.silu(self.norm(x))",
                         shape=", ".join(map(str, shape)))
    prob, cand, rec = tmp / "gn_problem.py", tmp / "gn_kiln.py", tmp / "gn_check.json"
    prob.write_text(src)
    cand.write_text(render(analyze(src), space.default("gnorm", "gnorm", "cuda"), set()))
    subprocess.run([sys.executable, "-m", "kiln.evals.cli", "check", str(prob), str(cand), "--device", "cuda",
                    "--json", str(rec)], timeout=300)
    r = json.loads(rec.read_text())
    t = r.get("timing") or {}
    print(json.dumps({"status": r["status"], "stages_s": r.get("stages_s"),
                      "speedups": {k: round(v["value"], 3) for k, v in (t.get("speedups") or {}).items()},
                      "candidate_median_us": (t.get("candidate") or {}).get("median_us"),
                      "baselines_us": {k: v.get("median_us") for k, v in (t.get("baselines") or {}).items()},
                      "timing_integrity": (r.get("integrity") or {}).get("timing"),
                      "reasons": r.get("reasons")}, indent=1), flush=True)


def load_src(tmp: Path, name: str, src: str):
    path = tmp / f"{name}.py"
    path.write_text(src)
    return load(path)


if __name__ == "__main__":
    sys.exit(main())
