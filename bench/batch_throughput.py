"""Compare the throughput of two `kiln eval` runs of the same batch (e.g. one GPU vs two).

    python bench/batch_throughput.py RUN_ONE_GPU RUN_TWO_GPUS

Each run directory holds results.sqlite (each finished sample's time) and, written by
`bench/device.sh kb_batch` beside it, RUN.start (the launch time). When the slower run was cut short by its
time budget, the fair comparison is the time each run took to finish the same number k of samples
(k = what the slower run finished), which this prints with the plain samples-per-hour figures.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path


def finish_times(run: Path) -> tuple[float, list[float], list[str]]:
    start = float(Path(f"{run}.start").read_text())
    with sqlite3.connect(run / "results.sqlite") as db:
        rows = db.execute("SELECT problem, created_at FROM samples ORDER BY created_at").fetchall()
    return start, [t - start for _, t in rows], [p for p, _ in rows]


def busy(run: Path, wall_s: float) -> list[str]:
    """Per GPU: checks run, seconds inside checks, and that share of the wall time; the gap to 100 %
    is time a GPU waited between checks (a slow Coder, fork-server starts, the batch's own work)."""
    per: dict[str, list[float]] = {}
    for path in sorted(run.glob("problems/*/sample*/check.json")):
        rec = json.loads(path.read_text())
        env = (rec.get("timing") or {}).get("env") or rec.get("env") or {}
        per.setdefault(str(env.get("gpu_index", "?")), []).append(float((rec.get("stages_s") or {}).get("total", 0.0)))
    return [f"| {run.name} | {gpu} | {len(t)} | {sum(t):.1f} | {wall_s:.1f} | {100 * sum(t) / wall_s:.0f} % |"
            for gpu, t in sorted(per.items())]


def main(a: str, b: str) -> int:
    runs = {}
    for name in (a, b):
        start, times, problems = finish_times(Path(name))
        runs[name] = {"done": len(times), "times": times, "problems": problems}
    k = min(r["done"] for r in runs.values())
    lines = ["| run | samples done | wall to last s | samples/hour | time to first k s |", "|---|---|---|---|---|"]
    for name, r in runs.items():
        last = r["times"][-1] if r["times"] else float("nan")
        tk = r["times"][k - 1] if k else float("nan")
        r["t_k"] = tk
        lines.append(f"| {Path(name).name} | {r['done']} | {last:.1f} | {r['done'] * 3600 / last:.0f} | {tk:.1f} |")
    ta, tb = runs[a]["t_k"], runs[b]["t_k"]
    same = sorted(runs[a]["problems"][:k]) == sorted(runs[b]["problems"][:k])
    lines += ["", f"k = {k}; speed-up of {Path(b).name} over {Path(a).name} to finish k samples: {ta / tb:.2f}x "
              f"({'the same' if same else 'not exactly the same'} first-k problems)"]
    lines += ["", "| run | GPU | checks | in checks s | wall s | busy |", "|---|---|---|---|---|---|"]
    for name, r in runs.items():
        lines += busy(Path(name), r["times"][-1] if r["times"] else float("nan"))
    print("\n".join(lines))
    print(json.dumps({"k": k, "ratio": ta / tb, "same_problems": same,
                      **{Path(n).name: {"done": r["done"], "t_k": r["t_k"]} for n, r in runs.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
