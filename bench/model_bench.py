"""Whole-model mode on the H200 with the built-in policies (issue 24): end-to-end figures per workload
for bench/RESULTS.md. Each part is one `kiln model` command with `--budget-minutes 8` (the whole
command, report and bundle included, fits one 10-minute device call):

    . bench/device_env.sh && python3 bench/model_bench.py --part resblock-fp32
    python3 bench/model_bench.py --list                    # the parts
    python3 bench/model_bench.py --table $OUT/model_bench  # the Markdown tables from finished parts
    bash bench/device.sh model:resblock-fp32               # the same, as a device.sh part

Rows reach the disk as they come: `$OUT/model_bench/<part>.log` is the command's output as it runs;
`<part>.json` (the command, its wall time, the ModelReport, the bundle's fresh-process reload check)
and `<part>.html` are written as soon as the part ends. The run directory stays outside $OUT (many
files): $KILN_BENCH_RUNS, default /tmp/kiln_model_runs.

The `overhead` part times the patch runtime itself (`python -m kiln.evals.model.overhead`): host time
of a call passing through a patched scope, of the guard, of a Triton launch (plain and lean), and the
SD-size fused group norm + SiLU against eager on the GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
QWEN = "transformers:qwen3?layers=4&hidden=2048&heads=16&kv_heads=8&intermediate=6144&vocab=32000"
RESBLOCKS = f"{REPO}/examples/model/sd_resblock.py:make"
STAGE4 = f"{REPO}/examples/model/resnet_stage4.py:make"
WORKLOADS: dict[str, tuple[str, str]] = {  # the four, then more
    "resblock-fp32": (RESBLOCKS, "fp32"),
    "resblock-bf16": (RESBLOCKS, "bf16"),
    "resnet50-stage4-fp32": (STAGE4, "fp32"),
    "qwen3-b8-bf16": (f"{QWEN}&batch=8&seq=512", "bf16"),
    "qwen3-b1-bf16": (f"{QWEN}&batch=1&seq=2048", "bf16"),
    "resnet50-fp32": ("timm:resnet50?batch=32", "fp32"),
}
ANCHORS = {"resblock-fp32": (0.71, 1.04), "resblock-bf16": (0.56, 0.53), "resnet50-stage4-fp32": (1.22, 0.77),
           "qwen3-b8-bf16": (7.23, 4.32)}
"""The issue's measured eager / torch.compile ms (H200, landed main, 2026-12-02)."""


def kiln_exe() -> list[str]:
    """The `kiln` a user would run: beside this Python, else on PATH (pip's script folder)."""
    exe = Path(sys.executable).parent / "kiln"
    found = str(exe) if exe.exists() else shutil.which("kiln")
    return [found] if found else [sys.executable, "-c", "from kiln.evals.cli import main; main()"]


def command(name: str, folder: Path, budget: float, top: int, max_iters: int) -> list[str]:
    target, dtype = WORKLOADS[name]
    return [*kiln_exe(), "model", target, "--device", "cuda", "--dtype", dtype, "--top", str(top),
            "--max-iters", str(max_iters), "--budget-minutes", f"{budget:g}", "--min-share", "0.02",
            "--trials", "3", "--timeout", "120", "--concurrency", "2", "--out", str(folder)]


def reload_check(report: dict, target: str, dtype: str) -> dict:
    """The bundle in a fresh process: `kiln.load(DIR).apply(model)` on a freshly built model must match
    the original's output (max abs error) and run its kernels."""
    if not report.get("bundle"):
        return {"skipped": "no bundle (nothing patched)"}
    code = ("import json, sys, torch, kiln\n"
            "from kiln.evals.model import targets\n"
            "t = targets.place(targets.build(sys.argv[1]), 'cuda', sys.argv[2])\n"
            "with torch.no_grad():\n    want = t.call()\n"
            "    with kiln.load(sys.argv[3]).applied(t.model) as h:\n        got = t.call()\n"
            "from kiln.evals.model.leaves import tensor_leaves\n"
            "err = max(float((a.float() - b.float()).abs().max()) for (_, a), (_, b) in "
            "zip(tensor_leaves(want), tensor_leaves(got)))\n"
            "print(json.dumps({'max_abs_err': err, 'calls': dict(h.table.calls), 'missing': h.missing}))\n")
    proc = subprocess.run([sys.executable, "-c", code, target, dtype, report["bundle"]], capture_output=True,
                          text=True, timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if proc.returncode == 0 and lines else {"error": proc.stderr[-800:]}


def run_part(name: str, out: Path, budget: float, top: int, max_iters: int) -> dict:
    target, dtype = WORKLOADS[name]
    folder = Path(os.environ.get("KILN_BENCH_RUNS", "/tmp/kiln_model_runs")) / name
    shutil.rmtree(folder, ignore_errors=True)
    cmd = command(name, folder, budget, top, max_iters)
    t0 = time.time()
    with (out / f"{name}.log").open("w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                            timeout=budget * 60 * 1.05 + 120).returncode
    row = {"part": name, "target": target, "dtype": dtype, "rc": rc, "wall_s": round(time.time() - t0, 1),
           "budget_s": budget * 60, "command": " ".join(cmd), "anchor_ms": ANCHORS.get(name)}
    if (folder / "model.json").exists():
        row["report"] = json.loads((folder / "model.json").read_text())
        shutil.copyfile(folder / "report.html", out / f"{name}.html")
        row["reload"] = reload_check(row["report"], target, {"fp32": "fp32", "bf16": "bf16"}[dtype])
    (out / f"{name}.json").write_text(json.dumps(row, indent=1))
    return row


def overhead_part(out: Path) -> dict:
    """The patch runtime's host costs on this machine (kiln.evals.model.overhead)."""
    proc = subprocess.run([sys.executable, "-m", "kiln.evals.model.overhead"], capture_output=True,
                          text=True, timeout=300, cwd=REPO)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    row = {"part": "overhead", **(json.loads(lines[-1]) if lines else {"error": proc.stderr[-1500:]})}
    (out / "overhead.json").write_text(json.dumps(row, indent=1))
    return row


def _ci(s: dict | None, digits: int = 3) -> str:
    return f"{s['value']:.{digits}f}x [{s['ci_low']:.{digits}f}, {s['ci_high']:.{digits}f}]" if s else "-"


def _lat(e2e: dict, variant: str) -> str:
    row = next((x for x in e2e.get("latency", []) if x["variant"] == variant), None)
    if not row or not row.get("stat"):
        return "-"
    s = row["stat"]
    return f"{s['median_us'] / 1e3:.3f} [{s['ci_low_us'] / 1e3:.3f}, {s['ci_high_us'] / 1e3:.3f}]"


def _mib(e2e: dict, k: str) -> str:
    v = e2e.get("peak_bytes", {}).get(k)
    return f"{v / 2**20:.0f}" if v else "-"


def e2e_row(row: dict) -> str:
    r = row.get("report") or {}
    e = r.get("e2e") or {}
    sp = e.get("speedups", {})
    anchor = "{:.2f} / {:.2f}".format(*row["anchor_ms"]) if row.get("anchor_ms") else "-"
    reload = row.get("reload", {})
    rel = "-" if not reload else reload.get("skipped") or (f"err {reload['max_abs_err']:.2g}" if "max_abs_err"
                                                           in reload else "FAILED")
    return (f"| {row['part']} | {row['wall_s']:.0f} / {row['budget_s']:.0f} | {anchor} | {_lat(e, 'eager')} | "
            f"{_lat(e, 'patched')} | {_lat(e, 'compile')} | {_lat(e, 'compile_patched')} | "
            f"{_ci(sp.get('patched_vs_eager'))} | {_ci(sp.get('compile_patched_vs_compile'))} | "
            f"{_mib(e, 'eager')} / {_mib(e, 'patched')} | {100 * e.get('coverage', 0):.1f}% | "
            f"{e.get('compile_policy', '-')} | {rel} |")


def op_rows(row: dict) -> list[str]:
    out = []
    for o in (row.get("report") or {}).get("ops", []):
        gpu = "{:.1f} / {:.1f}".format(*o["gpu_us"]) if o.get("gpu_us") else "-"
        out.append(f"| {row['part']} | `{o['group']}` ({o['op']}) | {100 * o['share']:.1f}% | {o['status']} | "
                   f"{_ci(o.get('speedup'), 2)} | {_ci(o.get('in_model'))} | {gpu} | {o['reason'][:110]} |")
    return out


def table(folder: Path) -> str:
    rows = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json")) if p.stem != "overhead"]
    e2e = ["| part | wall / budget s | anchor eager / compile ms | eager ms | patched ms | compile ms | "
           "compile(patched) ms | patched vs eager | compile(patched) vs compile | peak MiB eager / patched | "
           "coverage | compile policy | fresh-process reload |", "|" + "---|" * 13]
    ops = ["| part | op group | share | status | kernel alone vs eager | forward with it alone | kernel us before / "
           "after | why |", "|" + "---|" * 8]
    for row in rows:
        e2e.append(e2e_row(row))
        ops += op_rows(row)
    text = "\n".join(e2e) + "\n\n" + "\n".join(ops)
    if (folder / "overhead.json").exists():
        text += "\n\noverhead: " + (folder / "overhead.json").read_text()
    return text


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", action="append", default=[])
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--table", type=Path)
    ap.add_argument("--budget-minutes", type=float, default=8.0)
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--max-iters", type=int, default=3)
    a = ap.parse_args()
    if a.list:
        print("\n".join([f"{k}: {v[0]} ({v[1]})" for k, v in WORKLOADS.items()] + ["overhead: the patch runtime"]))
        return 0
    if a.table:
        print(table(a.table))
        return 0
    out = Path(os.environ.get("OUT", "/tmp/out")) / "model_bench"
    out.mkdir(parents=True, exist_ok=True)
    for name in a.part:
        if name != "overhead" and name not in WORKLOADS:
            print(f"unknown part {name!r}; --list shows them", file=sys.stderr)
            return 2
        row = overhead_part(out) if name == "overhead" else run_part(name, out, a.budget_minutes, a.top, a.max_iters)
        print(json.dumps({k: v for k, v in row.items() if k != "report"}), flush=True)
    print(table(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
