"""The built-in Coder one-shot over KernelBench files on one GPU: correct?, speed against eager and
torch.compile, % of roofline. One row per problem, appended to $OUT/builtin_kb.jsonl as it comes.

    . bench/device_env.sh && python3 bench/builtin_kb.py --root third_party/KernelBench --out $OUT/kb \\
        [--levels 1,2] [--problems 41-46,50,54-87,97] [--budget-s 540] [--compile-budget-s 240]

A lean in-process harness, not `kiln check` (which also runs the integrity layers and costs ~20 s a
problem): the first candidate (the H200 configuration) is generated, built with the reference's
weights and run on the problem's own inputs. Its output is judged by `kiln check`'s own rule
(`kiln.tools.tolerance.judge` against `kiln.tools.numerics.reference_trial`: the float64 reference,
the fp32 reference's own error, the magnitude of the data and the sensitivity; docs/tolerance.md),
in this one trusted process, on the problem's own inputs only (kiln check also draws scaled and
signed distributions). cuDNN convolutions run TF32 by default, so the fp32 reference's own error
is what PyTorch itself gets wrong. Times are
triton.testing.do_bench medians (L2 flushed). torch.compile is timed while --compile-budget-s
lasts (its builds take 10-60 s each). Roofline: max(bytes / copy bandwidth, FLOP / matrix peak),
bytes = inputs + parameters + output once, FLOP counted from the traced convs, matmuls and
attention, the peak measured in this run (cuBLAS TF32 8192^3; tf32x3 counts a third of it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import torch
import triton
from builtin_speed import DEV, _load, bench_ms, copy_gbps  # same folder: python3 bench/builtin_kb.py

from kiln.agents.base import CoderTask, GpuFacts
from kiln.agents.builtin import BuiltinCoder, space
from kiln.agents.builtin.source import analyze, render

VARIANT = [False]  # --conv-tf32: also time and judge the conv family with one TF32 product (cuDNN's default precision)
KNOB_SETS: list[dict] = []  # --variants: further knob sets of the problem's family, each timed and judged
def peaks() -> dict:
    bw = copy_gbps()
    n = 8192 if DEV == "cuda" else 256
    a = torch.randn(n, n, device=DEV)
    torch.backends.cuda.matmul.allow_tf32 = True
    tf32 = 2 * n**3 / (bench_ms(lambda: a @ a) * 1e-3) / 1e12
    torch.backends.cuda.matmul.allow_tf32 = False
    return {"copy_gbps": bw, "tf32_tflops": tf32}


def flops(an) -> float:
    """FLOP of the traced convs, transposed convs, matmuls and attention (2 per multiply-add)."""
    g, total = an.plan.g, 0.0
    for n in g.nodes:
        shapes = [g.nodes[a].shape for a in n.args]
        if n.kind == "mm":
            total += 2 * math.prod(n.shape) * shapes[0][-1]
        elif n.kind == "conv" and n.op == "conv":
            total += 2 * math.prod(n.shape) * math.prod(shapes[1][1:])
        elif n.kind == "conv":
            total += 2 * math.prod(shapes[0]) * math.prod(shapes[1][1:])
        elif n.kind == "attn":
            total += 4 * math.prod(shapes[0][:-1]) * shapes[1][-2] * shapes[0][-1]
    return total


def verdict(ref, inputs: list, got) -> tuple[bool, float, str]:
    """`kiln check`'s rule on one trial: (passed, worst error / allowance, the rule that decided)."""
    from kiln.tools import numerics
    from kiln.tools.check.judging import pack_on_device
    from kiln.tools.tolerance import judge

    key = 20261203
    exp, _ = numerics.reference_trial(ref, numerics.build(ref, "fp32"), tuple(inputs), tuple(inputs), seed=key,
                                      packer=pack_on_device)
    j = judge(exp, pack_on_device(got, key), dtype="fp32", atol=1e-4, rtol=1e-4)
    ratios = [v.max_err_over_tol for v in j.outputs if v.max_err_over_tol is not None]
    return j.mismatch is None, max(ratios, default=0.0 if j.mismatch is None else math.inf), j.rule


def run_problem(path: Path, tmp: Path, compile_ok: bool, pk: dict) -> dict:
    src = path.read_text()
    row: dict = {"level": path.parent.name, "problem": path.stem}
    task = CoderTask(mode="generate", problem_name=path.stem, problem_src=src, gpu=GpuFacts(device=DEV))
    t0 = time.time()
    reply = BuiltinCoder().write(task)
    row["generate_s"] = round(time.time() - t0, 2)
    if not reply.ok:
        return row | {"status": "unsupported", "reason": reply.error}
    an = analyze(src)
    row["family"] = an.family
    cand = tmp / f"cand_{path.stem}.py"
    cand.write_text(reply.source or "")
    prob, new_mod = _load(path, f"kbp_{path.stem}"), _load(cand, f"kbc_{path.stem}")
    torch.manual_seed(0)
    ref = prob.Model(*prob.get_init_inputs()).to(DEV)
    torch.manual_seed(0)
    new = new_mod.ModelNew(*prob.get_init_inputs()).to(DEV)
    new.load_state_dict(ref.state_dict())
    inputs = _inputs(prob)
    with torch.no_grad():
        got = new(*inputs)
        row["correct"], row["worst_of_allowance"], row["rule"] = verdict(ref, inputs, got)
        del got
        want = ref(*inputs)
        row["eager_ms"] = bench_ms(lambda: ref(*inputs))
        row["kiln_ms"] = bench_ms(lambda: new(*inputs))
        if VARIANT[0] and an.family == "conv":  # the conv default is tf32x3; its TF32 alternative
            row |= _variant(an, prob, ref, inputs, tmp, path.stem, {"prec": "tf32"})
        fam_knobs = space.KNOBS.get(an.family, {})
        for i, ks in enumerate(k for k in KNOB_SETS if set(k) <= set(fam_knobs)):
            v = _variant(an, prob, ref, inputs, tmp, f"{path.stem}_{i}", ks)
            row.setdefault("variants", []).append({"knobs": ks, "ms": v["variant_ms"], "correct": v["variant_correct"],
                                                   "worst": v["variant_worst"], "x_default": row["kiln_ms"] / v["variant_ms"]})
        if compile_ok and DEV == "cuda":
            t0 = time.time()
            comp = torch.compile(ref)
            comp(*inputs)
            row["compile_build_s"] = round(time.time() - t0, 1)
            row["compile_ms"] = bench_ms(lambda: comp(*inputs))
    return row | _roofline(an, ref, inputs, want, row, pk)


def _inputs(prob) -> list:
    """get_inputs() drawn on the GPU itself (KernelBench's level-1 inputs reach 4 G elements: seconds
    each to draw on the CPU); on the CPU and moved if that fails."""
    torch.manual_seed(1)
    try:
        with torch.device(DEV):
            xs = list(prob.get_inputs())
    except Exception:  # noqa: BLE001 - numpy interop and the like
        xs = list(prob.get_inputs())
    return [x.to(DEV) if torch.is_tensor(x) else x for x in xs]


def _variant(an, prob, ref, inputs, tmp: Path, stem: str, knobs: dict) -> dict:
    """The family's default configuration with `knobs` changed: its time and verdict."""
    cand = tmp / f"cand_{stem}_variant.py"
    cand.write_text(render(an, space.default(an.family, an.family, DEV) | knobs, set()))
    torch.manual_seed(0)
    new = _load(cand, f"kbc_{stem}_variant").ModelNew(*prob.get_init_inputs()).to(DEV)
    new.load_state_dict(ref.state_dict())
    ok, worst, _ = verdict(ref, inputs, new(*inputs))
    return {"variant_ms": bench_ms(lambda: new(*inputs)), "variant_correct": ok, "variant_worst": worst}


def _roofline(an, ref, inputs, out, row: dict, pk: dict) -> dict:
    ts = [t for t in inputs if torch.is_tensor(t)] + list(ref.parameters()) + [out]
    nbytes = sum(t.numel() * t.element_size() for t in ts)
    fl = flops(an)
    peak = pk["tf32_tflops"] / 3  # fp32 through tf32x3: three TF32 products
    floor_ms = max(nbytes / pk["copy_gbps"] / 1e6, fl / peak / 1e9)
    res = {"bytes": nbytes, "flop": fl, "floor_ms": floor_ms, "pct_roofline": 100 * floor_ms / row["kiln_ms"],
           "x_eager": row["eager_ms"] / row["kiln_ms"]}  # fmt: skip
    if "compile_ms" in row:
        res["x_compile"] = row["compile_ms"] / row["kiln_ms"]
    return res


def select(root: Path, levels: list[str], spec: str | None) -> list[Path]:
    keep: set[int] | None = None
    if spec:
        keep = set()
        for part in spec.split(","):
            lo, _, hi = part.partition("-")
            keep |= set(range(int(lo), int(hi or lo) + 1))
    out = []
    for lvl in levels:
        files = sorted((root / "KernelBench" / f"level{lvl}").glob("*.py"), key=lambda p: int(p.name.split("_")[0]))
        out += [p for p in files if keep is None or int(p.name.split("_")[0]) in keep]
    return out


def table(rows: list[dict]) -> str:
    lines = ["| level | problem | family | correct | eager ms | compile ms | kiln ms | x eager | x compile | % roofline "
             "| tf32 ms (ok?) |", "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip

    def f(v, fmt):
        return format(v, fmt) if isinstance(v, float) else "-"

    for r in rows:
        ok = r.get("status") or ("yes" if r.get("correct") else "NO")
        lines.append(f"| {r['level']} | {r['problem']} | {r.get('family', '-')} | {ok} | {f(r.get('eager_ms'), '.3f')} | "
                     f"{f(r.get('compile_ms'), '.3f')} | {f(r.get('kiln_ms'), '.3f')} | {f(r.get('x_eager'), '.2f')} | "
                     f"{f(r.get('x_compile'), '.2f')} | {f(r.get('pct_roofline'), '.0f')} | "
                     f"{f(r.get('variant_ms'), '.3f')}{'' if 'variant_ms' not in r else ' (ok)' if r.get('variant_correct') else ' (NO)'} |")  # fmt: skip
    for lvl in sorted({r["level"] for r in rows}):
        rs = [r for r in rows if r["level"] == lvl]
        ok = [r for r in rs if r.get("correct")]
        geo = {}
        for k in ("x_eager", "x_compile", "pct_roofline"):
            vals = [r[k] for r in ok if r.get(k)]
            geo[k] = f"{math.exp(sum(map(math.log, vals)) / len(vals)):.2f} ({len(vals)})" if vals else "n/a"
        lines.append(f"\n{lvl}: {len(ok)} correct of {len(rs)} run; geomean over the correct (count): "
                     f"{geo['x_eager']} x eager, {geo['x_compile']} x compile, {geo['pct_roofline']} % of roofline")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, required=True, help="the KernelBench checkout (holds KernelBench/level1)")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/out")) / "kb")
    ap.add_argument("--levels", default="1,2")
    ap.add_argument("--problems", default=None, help="problem numbers, e.g. 41-46,50,54-87,97")
    ap.add_argument("--budget-s", type=float, default=540.0)
    ap.add_argument("--compile-budget-s", type=float, default=240.0, help="time for torch.compile baselines")
    ap.add_argument("--conv-tf32", action="store_true", help="conv problems: also time and judge one TF32 product")
    ap.add_argument("--variants", default="", help="knob sets to time beside the default, for the families that have "
                                                   "those knobs: 'block_n=64,num_warps=4;num_stages=4'")
    a = ap.parse_args()
    VARIANT[0] = a.conv_tf32
    for part in filter(None, a.variants.split(";")):
        KNOB_SETS.append({k: (v if not v.lstrip("-").isdigit() else int(v)) for k, v in
                          (kv.split("=", 1) for kv in part.split(","))})
    a.out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    pk = peaks()
    env = {"gpu": torch.cuda.get_device_name() if DEV == "cuda" else "cpu (dry run)", "torch": torch.__version__, "triton": triton.__version__} | pk
    (a.out / "env.json").write_text(json.dumps(env, indent=1))
    print(json.dumps(env), flush=True)
    rows, compile_used = [], 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for path in select(a.root, a.levels.split(","), a.problems):
            if time.time() - start > a.budget_s:
                rows.append({"level": path.parent.name, "problem": path.stem, "status": "not run (budget)"})
                continue
            try:
                row = run_problem(path, Path(tmp), compile_used < a.compile_budget_s, pk)
            except Exception as err:  # noqa: BLE001 - a crashing candidate is a row of the table
                row = {"level": path.parent.name, "problem": path.stem, "status": "error",
                       "reason": f"{type(err).__name__}: {err}"[:400]}  # fmt: skip
            compile_used += row.get("compile_build_s", 0.0)
            rows.append(row)
            torch.cuda.empty_cache() if DEV == "cuda" else None
            with open(a.out / "builtin_kb.jsonl", "a") as fh:
                fh.write(json.dumps(row) + "\n")
            (a.out / "builtin_kb.md").write_text(table(rows) + "\n")  # a cut-off run keeps its table
            print(json.dumps(row), flush=True)
    (a.out / "builtin_kb.md").write_text(table(rows) + "\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
