"""Whole-model mode on the H200 with the built-in policies: per-op and end-to-end figures for
bench/RESULTS.md. Runnable in parts, each well under one device command's 10 minutes:

    . bench/device_env.sh && python3 bench/model_bench.py --part resblock-fp32
    python3 bench/model_bench.py --list                    # the parts
    python3 bench/model_bench.py --table $OUT/model_bench  # the Markdown tables from finished parts

Each part runs `kiln model` (builtin Coder/Judge/Proposer, --budget-minutes for the whole model split by
share of time) and writes $OUT/model_bench/<part>.json (the ModelReport plus the command) and
$OUT/model_bench/<part>.html (the report). SD-style ResBlocks use diffusers' ResnetBlock2D when
diffusers is installed, else examples/model/sd_resblock.py (the same layout).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import time
from pathlib import Path

QWEN = "transformers:qwen3?layers=4&hidden=2048&heads=16&kv_heads=8&intermediate=6144&vocab=32000"
RESBLOCK = ("diffusers:resnet-block?ch=320&size=64&batch=2" if importlib.util.find_spec("diffusers")
            else "examples/model/sd_resblock.py:make")
PARTS: dict[str, tuple[str, str, dict]] = {
    "resnet50-fp32": ("timm:resnet50?batch=32", "fp32", {}),
    "resnet50-bf16": ("timm:resnet50?batch=32", "bf16", {}),
    "resblock-fp32": (RESBLOCK, "fp32", {}),
    "resblock-bf16": (RESBLOCK, "bf16", {}),
    "qwen3-b1-bf16": (f"{QWEN}&batch=1&seq=2048", "bf16", {}),
    "qwen3-b8-bf16": (f"{QWEN}&batch=8&seq=512", "bf16", {}),
    "qwen3-eager-attn-b1-bf16": (f"{QWEN}&batch=1&seq=2048&attn=eager", "bf16", {}),
    "qwen3-b1-fp32": (f"{QWEN}&batch=1&seq=2048", "fp32", {}),
    "sd3-block-bf16": ("diffusers:sd3-block?dim=1536&tokens=4096&batch=2", "bf16", {"needs": "diffusers"}),
}


def run_part(name: str, out: Path, budget_minutes: float, top: int, max_iters: int) -> dict:
    from kiln.evals.model.optimise import OptimiseOptions
    from kiln.evals.model.run import ModelRunOptions, start

    target, dtype, extra = PARTS[name]
    if extra.get("needs") and importlib.util.find_spec(extra["needs"]) is None:
        return {"part": name, "skipped": f"{extra['needs']} is not installed here"}
    o = OptimiseOptions(device="cuda", dtype=dtype, max_iters=max_iters, budget_minutes=budget_minutes, trials=3,
                        concurrency=2, check_timeout_s=120)
    opts = ModelRunOptions(target=target, device="cuda", dtype=dtype, top=top, min_share=0.02, seeds=3, optimise=o)
    folder = Path(os.environ.get("KILN_BENCH_RUNS", "/tmp/kiln_model_runs")) / name  # many files: not in $OUT
    shutil.rmtree(folder, ignore_errors=True)
    t0 = time.time()
    report = start(opts, folder, lambda s: print(s, flush=True))
    shutil.copyfile(folder / "report.html", out / f"{name}.html")
    row = {"part": name, "target": target, "dtype": dtype, "wall_s": round(time.time() - t0, 1),
           "command": f"kiln model '{target}' --device cuda --dtype {dtype} --top {top} --max-iters {max_iters} "
                      f"--budget-minutes {budget_minutes} --min-share 0.02",
           "report": json.loads(report.model_dump_json())}
    (out / f"{name}.json").write_text(json.dumps(row, indent=1))
    return row


def _ci(s: dict | None) -> str:
    return f"{s['value']:.2f}x [{s['ci_low']:.2f}, {s['ci_high']:.2f}]" if s else "-"


def _lat(e2e: dict, variant: str) -> str:
    row = next((x for x in e2e.get("latency", []) if x["variant"] == variant), None)
    if not row or not row.get("stat"):
        return "-"
    s = row["stat"]
    return f"{s['median_us'] / 1e3:.3f} [{s['ci_low_us'] / 1e3:.3f}, {s['ci_high_us'] / 1e3:.3f}]"


def table(folder: Path) -> str:
    rows = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
    e2e = ["| part | eager ms | patched ms | compile ms | compile(patched) ms | patched vs eager | patched vs compile "
           "| compile(patched) vs compile | coverage | compile policy |", "|" + "---|" * 10]
    ops = ["| part | op group | share | status | kernel vs eager (CI) | vs compile | why |", "|" + "---|" * 7]
    for row in rows:
        if "skipped" in row:
            e2e.append(f"| {row['part']} | skipped: {row['skipped']} |" + " |" * 8)
            continue
        r = row["report"]
        e = r.get("e2e") or {}
        sp = e.get("speedups", {})
        e2e.append(f"| {row['part']} | {_lat(e, 'eager')} | {_lat(e, 'patched')} | {_lat(e, 'compile')} | "
                   f"{_lat(e, 'compile_patched')} | {_ci(sp.get('patched_vs_eager'))} | "
                   f"{_ci(sp.get('patched_vs_compile'))} | {_ci(sp.get('compile_patched_vs_compile'))} | "
                   f"{100 * e.get('coverage', 0):.1f}% | {e.get('compile_policy', '-')} |")
        for o in r["ops"]:
            comp = o.get("speedup_compile")
            vs_compile = f"{comp['value']:.2f}x" if comp else "-"
            ops.append(f"| {row['part']} | `{o['group']}` ({o['op']}) | {100 * o['share']:.1f}% | {o['status']} | "
                       f"{_ci(o.get('speedup'))} | {vs_compile} | {o['reason'][:80]} |")
    return "\n".join(e2e) + "\n\n" + "\n".join(ops)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", action="append", default=[])
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--table", type=Path)
    ap.add_argument("--budget-minutes", type=float, default=4.0)
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--max-iters", type=int, default=3)
    a = ap.parse_args()
    if a.list:
        print("\n".join(f"{k}: {v[0]} ({v[1]})" for k, v in PARTS.items()))
        return 0
    if a.table:
        print(table(a.table))
        return 0
    out = Path(os.environ.get("OUT", "/tmp/out")) / "model_bench"
    out.mkdir(parents=True, exist_ok=True)
    for name in a.part:
        if name not in PARTS:
            print(f"unknown part {name!r}; --list shows them", file=sys.stderr)
            return 2
        row = run_part(name, out, a.budget_minutes, a.top, a.max_iters)
        print(json.dumps({k: v for k, v in row.items() if k != "report"}), flush=True)
    print(table(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
