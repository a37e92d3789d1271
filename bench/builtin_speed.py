"""Speed of the built-in coder's kernels at large sizes on one GPU, against eager and torch.compile.

    . bench/device_env.sh && python bench/builtin_speed.py [--budget-s 230] [PROBLEM.py ...]

For each problem (default: examples/large/*.py) it sweeps a few configurations of the built-in
template (the default first), checks each against eager (atol = rtol = 1e-4, fp32), and times it
with triton.testing.do_bench(return_mode="median") (L2 flushed before each call). Memory-bound
problems also report GB/s and % of the measured device copy bandwidth (ideal bytes = every input,
parameter and output once). Prints a table; writes $OUT/builtin_speed.json after every problem.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import torch
import triton
from triton.testing import do_bench

from kiln.agents.builtin import space
from kiln.agents.builtin.source import analyze, render

SWEEPS: dict[str, list[dict]] = {
    "row": [
        {"tile": 4096, "num_warps": 8, "persistent": 0, "num_stages": 1},
        {"tile": 4096, "num_warps": 16, "persistent": 0, "num_stages": 1},
        {"tile": 8192, "num_warps": 16, "persistent": 0, "num_stages": 1},
        {"tile": 4096, "num_warps": 4, "persistent": 0, "num_stages": 1},
        {"tile": 8192, "num_warps": 8, "persistent": 0, "num_stages": 1},
        {"tile": 4096, "num_warps": 8, "persistent": 1, "num_stages": 2},
        {"tile": 4096, "num_warps": 16, "persistent": 1, "num_stages": 1},
        {"tile": 2048, "num_warps": 4, "persistent": 0, "num_stages": 1},
        {"tile": 16384, "num_warps": 16, "persistent": 0, "num_stages": 1},
    ],
    "elementwise": [
        {"block": 2048, "num_warps": 8, "persistent": 0},
        {"block": 1024, "num_warps": 4, "persistent": 0},
        {"block": 2048, "num_warps": 4, "persistent": 0},
        {"block": 4096, "num_warps": 8, "persistent": 0},
        {"block": 4096, "num_warps": 4, "persistent": 0},
        {"block": 8192, "num_warps": 16, "persistent": 0},
        {"block": 2048, "num_warps": 8, "persistent": 1},
        {"block": 4096, "num_warps": 16, "persistent": 1},
    ],
    "matmul": [{"tile": t, "prec": "tf32x3"} for t in (4, 5, 6, 2, 3)] + [{"tile": 4, "prec": "ieee"}],
    "gnorm": [{"block": b, "num_warps": w} for b, w in ((2048, 4), (4096, 4), (4096, 8), (1024, 4), (8192, 8),
                                                         (2048, 8), (1024, 2))],
}


# `--variants`: the row template's fixed choices against each other (the L2 eviction hint on one-pass
# loads, the cols layout's BLOCK_N), the rest as the default: the sweep behind the >= 90 % row sums.
ROW_VARIANTS: list[dict] = [
    {"tile": 8192, "num_warps": 8, "persistent": 0, "num_stages": 1, "evict": 0},
    {"tile": 8192, "num_warps": 8, "persistent": 0, "num_stages": 1, "evict": 1},
    {"tile": 4096, "num_warps": 16, "persistent": 0, "num_stages": 1, "evict": 0},
    {"tile": 4096, "num_warps": 16, "persistent": 0, "num_stages": 1, "evict": 1},
    {"tile": 16384, "num_warps": 16, "persistent": 0, "num_stages": 1, "evict": 1},
    {"tile": 4096, "num_warps": 8, "persistent": 0, "num_stages": 1, "block_n": 128},
    {"tile": 4096, "num_warps": 8, "persistent": 0, "num_stages": 1, "block_n": 64},
    {"tile": 4096, "num_warps": 4, "persistent": 0, "num_stages": 1, "block_n": 64},
    {"tile": 4096, "num_warps": 4, "persistent": 0, "num_stages": 1, "block_n": 32},
    {"tile": 8192, "num_warps": 8, "persistent": 0, "num_stages": 1, "block_n": 64},
    {"tile": 2048, "num_warps": 4, "persistent": 0, "num_stages": 1, "block_n": 32},
    {"tile": 4096, "num_warps": 8, "persistent": 0, "num_stages": 3, "block_n": 64},
]

VARIANTS = [False]
DEV = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: a dry run under TRITON_INTERPRET=1


def bench_ms(fn) -> float:
    if DEV == "cuda":
        return do_bench(fn, return_mode="median")
    fn()
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def copy_gbps() -> float:
    src = torch.empty(1 << 28 if DEV == "cuda" else 1 << 20, dtype=torch.float32, device=DEV).normal_()
    dst = torch.empty_like(src)
    ms = bench_ms(lambda: dst.copy_(src))
    return 2 * src.numel() * 4 / (ms * 1e-3) / 1e9


def _bytes(model, inputs, out) -> int:
    ts = list(inputs) + list(model.parameters()) + [out]
    return sum(t.numel() * t.element_size() for t in ts)


def _candidate(an, knobs: dict, tag: str, tmp: Path):
    path = tmp / f"cand_{tag}.py"
    path.write_text(render(an, knobs, set()))
    return _load(path, f"kiln_bench_{tag}")


def bench_problem(path: Path, deadline: float, tmp: Path) -> dict:
    src = path.read_text()
    an = analyze(src)
    ns = an.problem.namespace
    torch.manual_seed(0)
    ref = ns["Model"](*ns["get_init_inputs"]()).to(DEV)
    inputs = [t.to(DEV) for t in ns["get_inputs"]()]
    with torch.no_grad():
        want = ref(*inputs)
        res = {"problem": path.stem, "family": an.family, "shape": [list(t.shape) for t in inputs]}
        res["eager_ms"] = bench_ms(lambda: ref(*inputs))
        t0 = time.time()
        comp = torch.compile(ref)
        comp(*inputs)
        res["compile_build_s"] = round(time.time() - t0, 1)
        res["compile_ms"] = bench_ms(lambda: comp(*inputs))
        res["bytes"] = _bytes(ref, inputs, want)
        res["flops"] = 2 * want.numel() * inputs[0].shape[-1] if an.family == "matmul" else None
        res["configs"] = []
        first = space.default(an.family, an.variant, "cuda")
        table = ROW_VARIANTS if VARIANTS[0] and an.family == "row" else SWEEPS.get(an.family, [])
        sweep = [first] + [k for k in table if k != first]
        for i, knobs in enumerate(sweep):
            if i > 0 and time.time() > deadline:
                res["truncated"] = True
                break
            res["configs"].append(_one_config(an, knobs, f"{path.stem}_{i}", tmp, ref, inputs, want))
    return res


def _one_config(an, knobs, tag, tmp, ref, inputs, want) -> dict:
    row: dict = {"knobs": knobs}
    try:
        mod = _candidate(an, knobs, tag, tmp)
        ns = an.problem.namespace
        torch.manual_seed(0)
        new = mod.ModelNew(*ns["get_init_inputs"]()).to(DEV)
        new.load_state_dict(ref.state_dict())
        got = new(*inputs)
        torch.cuda.synchronize() if DEV == "cuda" else None
        row["max_abs_err"] = float((got - want).abs().max())
        row["correct"] = bool(torch.allclose(got, want, atol=1e-4, rtol=1e-4))
        row["ms"] = bench_ms(lambda: new(*inputs))
    except Exception as err:  # noqa: BLE001 - a failing configuration is a row of the table
        row["error"] = f"{type(err).__name__}: {err}"[:300]
    return row


def summarize(res: dict, bw: float) -> dict:
    ok = [c for c in res["configs"] if c.get("correct") and "ms" in c]
    best = min(ok, key=lambda c: c["ms"]) if ok else None
    default = res["configs"][0] if res["configs"] else {}
    out = {"best_knobs": best["knobs"] if best else None, "best_ms": best["ms"] if best else None,
           "default_ms": default.get("ms") if default.get("correct") else None}  # fmt: skip
    for name in ("best", "default"):
        ms = out[f"{name}_ms"]
        if ms:
            out[f"{name}_vs_eager"] = res["eager_ms"] / ms
            out[f"{name}_vs_compile"] = res["compile_ms"] / ms
            if res["family"] != "matmul":
                out[f"{name}_pct_copy_bw"] = 100 * res["bytes"] / (ms * 1e-3) / 1e9 / bw
    if res["family"] != "matmul":
        out["compile_pct_copy_bw"] = 100 * res["bytes"] / (res["compile_ms"] * 1e-3) / 1e9 / bw
        out["eager_pct_copy_bw"] = 100 * res["bytes"] / (res["eager_ms"] * 1e-3) / 1e9 / bw
    elif out["best_ms"]:
        out["best_tflops"] = res["flops"] / (out["best_ms"] * 1e-3) / 1e12
        out["compile_tflops"] = res["flops"] / (res["compile_ms"] * 1e-3) / 1e12
    return out


def table(results: list[dict]) -> str:
    lines = [f"{'problem':<18} {'eager ms':>9} {'compile ms':>10} {'kiln ms':>8} {'x eager':>8} {'x compile':>9} "
             f"{'%copy':>6} {'comp %copy':>10}  best knobs"]  # fmt: skip
    for r in results:
        s = r["summary"]
        pct = s.get("best_pct_copy_bw")
        lines.append(
            f"{r['problem']:<18} {r['eager_ms']:9.3f} {r['compile_ms']:10.3f} {s['best_ms'] or float('nan'):8.3f} "
            f"{s.get('best_vs_eager', float('nan')):8.2f} {s.get('best_vs_compile', float('nan')):9.2f} "
            f"{(pct if pct else float('nan')):6.1f} {s.get('compile_pct_copy_bw', float('nan')):10.1f}  {json.dumps(s['best_knobs'])}"
        )
    geo = [r["summary"]["best_vs_compile"] for r in results if r["summary"].get("best_vs_compile")]
    if geo:
        lines.append(f"geomean vs torch.compile (best config): {math.exp(sum(map(math.log, geo)) / len(geo)):.3f}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("problems", nargs="*", type=Path)
    ap.add_argument("--budget-s", type=float, default=230.0)
    ap.add_argument("--variants", action="store_true", help="row problems: sweep ROW_VARIANTS")
    args = ap.parse_args()
    VARIANTS[0] = args.variants
    start = time.time()
    problems = args.problems or sorted(Path("examples/large").glob("*.py"))
    out_dir = Path(os.environ.get("OUT", "/tmp/out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    bw = copy_gbps()
    env = {"gpu": torch.cuda.get_device_name() if DEV == "cuda" else "cpu (interpreter)", "torch": torch.__version__, "triton": triton.__version__,
           "copy_gbps": bw, "space_defaults": space.DEFAULTS}  # fmt: skip
    print(json.dumps(env), flush=True)
    results: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, p in enumerate(problems):
            share = start + args.budget_s * (i + 1) / len(problems)
            res = bench_problem(p, min(share, start + args.budget_s), Path(tmp))
            res["summary"] = summarize(res, bw)
            results.append(res)
            print(json.dumps(res), flush=True)
            (out_dir / "builtin_speed.json").write_text(json.dumps({"env": env, "results": results}, indent=1))
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
