"""The curriculum's figures on a GPU machine, with the built-in policies (no LLM):

    . bench/device_env.sh 2>/dev/null; python bench/curriculum_figures.py --out /tmp/kiln-curriculum

runs `kiln curriculum --device cuda` (3 rounds; every visible GPU is a slot; rerun to resume) and
prints, as JSON and as Markdown rows for bench/RESULTS.md: modules generated per hour, the share
accepted (and why the others were refused), the pass rate per family per round, and samples
checked per GPU-hour. `--device cpu` runs the same on the interpreter (figures mean little there).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from kiln.evals.curriculum.card import family_rates
from kiln.evals.curriculum.report import throughput
from kiln.evals.curriculum.store import CurriculumStore


def figures(out: Path, n_gpus: int) -> dict:
    store = CurriculumStore(out / "curriculum.sqlite")
    modules, samples = store.modules(), store.samples()
    by_module: dict[str, list] = {}
    for s in samples:
        by_module.setdefault(s.module, []).append(s)
    tp = throughput(store, modules, samples)
    gpu_hours = tp["wall_s"] / 3600 * max(1, n_gpus)
    return {
        "gpus": n_gpus, **tp,
        "samples_per_gpu_hour": round(len(samples) / gpu_hours, 1) if gpu_hours else 0.0,
        "modules": len(modules), "accepted": sum(m.accepted for m in modules), "samples": len(samples),
        "refused": dict(Counter((m.reason or "").split(":")[0] for m in modules if not m.accepted)),
        "pass_rate": {f: {str(r): f"{p}/{n}" for r, (p, n) in sorted(by.items())}
                      for f, by in sorted(family_rates(modules, by_module).items())},
        "check_s_median": sorted(s.check_s for s in samples)[len(samples) // 2] if samples else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/kiln-curriculum"))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--per-round", type=int, default=6)
    ap.add_argument("--samples", type=int, default=4)
    args = ap.parse_args()
    cmd = [sys.executable, "-m", "kiln.evals.cli", "curriculum", "--out", str(args.out), "--device", args.device,
           "--rounds", str(args.rounds), "--per-round", str(args.per_round), "--samples", str(args.samples)]
    subprocess.run(cmd, check=True)
    n_gpus = 0
    if args.device == "cuda":
        import torch

        n_gpus = torch.cuda.device_count()
    fig = figures(args.out, n_gpus)
    print(json.dumps(fig, indent=2))
    print(f"| {fig['gpus']} GPU | {fig['modules_per_hour']} modules/h | {100 * fig['accepted_share']:.0f} % accepted "
          f"| {fig['samples_per_gpu_hour']} samples/GPU-h | median check {fig['check_s_median']} s |")
    for fam, by in fig["pass_rate"].items():
        print(f"| {fam} | " + " | ".join(f"round {r}: {v}" for r, v in by.items()) + " |")
    (args.out / "figures.json").write_text(json.dumps(fig, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
