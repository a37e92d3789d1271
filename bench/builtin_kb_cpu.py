"""The built-in Coder one-shot over KernelBench level 1 and 2 on the CPU machine: every file shrunk
(`kiln.graphs.shrink.fit`, the same halving `kiln run --shrink` does) until its inputs and outputs
hold at most --max-numel elements, its first candidate written for the CPU, then `kiln check --device
cpu --no-time` on it in a fresh process: all of kiln's check (trials over the four input
distributions, the numerics rule, integrity) under Triton's interpreter. One JSON line a problem in
$OUT/builtin_kb_cpu.jsonl, as it comes; a table at the end.

    python bench/builtin_kb_cpu.py --root third_party/KernelBench [--levels 1,2] [--problems 1-20]
        [--max-numel 65536] [--jobs 2] [--timeout-s 240]

What it is not: the H200's numbers (bench/builtin_kb.py). The interpreter runs a fp32 `tl.dot` exactly
(no bf16x3 / tf32x3 split), and sizes are shrunk (channels and lengths halved, kernel sizes, strides
and dims below 16 left alone). It tells whether each kernel's indexing, masking, reductions and
epilogues are right for the file's own structure, on every file, without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kiln.agents.base import CoderTask, GpuFacts
from kiln.agents.builtin import BuiltinCoder
from kiln.graphs.shrink import fit


def numbers(spec: str | None) -> set[int] | None:
    if not spec:
        return None
    out: set[int] = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def prepare(path: Path, work: Path, max_numel: int) -> dict:
    """Shrink the problem and write its first candidate; a row (no check yet) or the reason for none."""
    row: dict = {"level": path.parent.name, "problem": path.stem}
    src = path.read_text()
    try:
        small, changed, (n_in, n_out) = fit(src, path, max_numel)
    except Exception as err:  # noqa: BLE001 - a problem that cannot be sized: a row that says so
        return {**row, "status": "shrink_error", "reason": f"{type(err).__name__}: {err}"[:300]}
    row.update(shrunk=changed, input_numel=n_in, output_numel=n_out)
    prob = work / f"{path.parent.name}_{path.name}"
    prob.write_text(small)
    t0 = time.monotonic()
    reply = BuiltinCoder().write(CoderTask(mode="generate", problem_name=path.stem, problem_src=small, gpu=GpuFacts()))
    row["generate_s"] = round(time.monotonic() - t0, 2)
    if not reply.ok or not reply.source:
        return {**row, "status": "unsupported", "reason": (reply.error or "")[:300]}
    cand = work / f"cand_{path.parent.name}_{path.name}"
    cand.write_text(reply.source)
    return {**row, "problem_file": str(prob), "candidate_file": str(cand)}


def run_check(row: dict, timeout_s: float) -> dict:
    if "candidate_file" not in row:
        return row
    out = Path(row["candidate_file"]).with_suffix(".json")
    cmd = [sys.executable, "-m", "kiln.evals.cli", "check", row["problem_file"], row["candidate_file"],
           "--device", "cpu", "--no-time", "--timeout", str(timeout_s), "--json", str(out)]
    t0 = time.monotonic()
    try:
        subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s + 60)
    except subprocess.TimeoutExpired:
        return {**row, "status": "bench_timeout", "wall_s": round(time.monotonic() - t0, 1)}
    row["wall_s"] = round(time.monotonic() - t0, 1)
    if not out.is_file():
        return {**row, "status": "no_record"}
    rec = json.loads(out.read_text())
    corr = rec.get("correctness") or {}
    worst = [o.get("max_err_over_tol") for t in corr.get("trials") or [] for o in (t.get("outputs") or [])]
    worst = [w for w in worst if w is not None]
    row.update(status=rec.get("status"), reason=(rec.get("reasons") or [""])[0][:300],
               n_trials=corr.get("n_trials"), n_passed=corr.get("n_passed"),
               worst_of_allowance=max(worst) if worst else None, total_s=(rec.get("stages_s") or {}).get("total"))
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, required=True, help="the KernelBench checkout (holds KernelBench/level1)")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/out")) / "kb_cpu")
    ap.add_argument("--levels", default="1,2")
    ap.add_argument("--problems", default=None, help="problem numbers, e.g. 1-20,95")
    ap.add_argument("--max-numel", type=int, default=65536, help="inputs + outputs after shrinking")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout-s", type=float, default=240.0)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows_path = args.out / "builtin_kb_cpu.jsonl"
    want = numbers(args.problems)
    files = [p for lv in args.levels.split(",") for p in sorted((args.root / "KernelBench" / f"level{lv}").glob("*.py"),
                                                              key=lambda p: int(p.name.split("_")[0]))
             if want is None or int(p.name.split("_")[0]) in want]
    work = Path(tempfile.mkdtemp(prefix="kiln-kb-cpu-"))
    rows = []
    with ThreadPoolExecutor(args.jobs) as pool, rows_path.open("a") as sink:
        futures = [pool.submit(run_check, prepare(p, work, args.max_numel), args.timeout_s) for p in files]
        for i, fut in enumerate(futures, 1):
            row = fut.result()
            rows.append(row)
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            print(f"[{i}/{len(files)}] {row['level']} {row['problem']}: {row['status']} "
                  f"{row.get('reason', '')[:120]}", flush=True)
    summary(rows)
    return 0


def summary(rows: list[dict]) -> None:
    by: dict[tuple[str, str], int] = {}
    for r in rows:
        by[(r["level"], r["status"])] = by.get((r["level"], r["status"]), 0) + 1
    print("\n| level | status | problems |\n|---|---|---|")
    for (level, status), n in sorted(by.items()):
        print(f"| {level} | {status} | {n} |")


if __name__ == "__main__":
    sys.exit(main())
