"""Replay a measured `kiln eval` batch on this machine to see what the batch itself costs.

    python bench/batch_replay.py --root third_party/KernelBench --problems 1,2,19-32,36,40,47-49,53,88 \
        --records RUN_1GPU --records RUN_2GPU --slots 1 --slots 2 --out /tmp/replay

Everything of a real one-shot batch runs (the built-in Coder on the real problem files, the job
threads, the SQLite store, the slots) except the GPU check: a stand-in evaluator holds a slot for
as long as that problem's check took in the measured run (its `stages_s.total`; the first
`--records` run that has the problem wins) and returns the measured record. With one and two
slots, the ratio of the two wall times is the throughput a batch can reach on two GPUs when each
check takes as long as it did alone, so what it loses is the batch's own doing: candidates not
ready when a slot frees, start-up, the last check running alone. GPU-side contention (two checks
sharing the host's CPUs and memory) is not in it: that needs the real two-GPU run.
"""

from __future__ import annotations

import argparse
import json
import queue
import subprocess
import sys
import time
from pathlib import Path

from kiln.evals.batch.jobs import BatchConfig
from kiln.evals.batch.problems import kernelbench_problems, parse_ids
from kiln.evals.batch.run import Batch
from kiln.tools.records import CheckOptions, CheckRecord


def measured(runs: list[Path]) -> dict[str, CheckRecord]:
    """problem key -> its check record, from the first run that checked it."""
    found: dict[str, CheckRecord] = {}
    for run in runs:
        for path in sorted(run.glob("problems/*/sample0/check.json")):
            key = path.parent.parent.name.replace("__", "/")
            found.setdefault(key, CheckRecord.model_validate_json(path.read_text()))
    return found


class ReplayEvaluator:
    """Holds one of `slots` for the measured check time of the problem, then returns its record."""

    def __init__(self, records: dict[str, CheckRecord], slots: int, scale: float) -> None:
        self.records, self.scale = records, scale
        self.on_gpu = True
        self.n_slots = slots
        self._slots: queue.Queue[int] = queue.Queue()
        for s in range(slots):
            self._slots.put(s)
        self.busy: list[tuple[int, float, float]] = []  # (slot, start, end), monotonic

    def check(self, problem: Path, candidate: Path, options: CheckOptions) -> CheckRecord:
        key = f"{problem.parent.name}/{problem.stem}"
        rec = self.records[key]
        slot = self._slots.get()
        try:
            start = time.monotonic()
            time.sleep(rec.stages_s.get("total", 0.0) * self.scale)
            self.busy.append((slot, start, time.monotonic()))
        finally:
            self._slots.put(slot)
        return rec.model_copy(update={"problem": str(problem), "candidate": str(candidate)})


def replay(root: Path, ids: str, records: dict[str, CheckRecord], slots: int, scale: float, out: Path,
           concurrency: int) -> dict:
    problems = [p for p in kernelbench_problems(root, [1], parse_ids(ids)) if p.key in records]
    cfg = BatchConfig(mode="oneshot", llm="builtin", device="cuda")
    ev = ReplayEvaluator(records, slots, scale)
    start = time.monotonic()
    batch = Batch(out, problems, cfg, ev, concurrency=concurrency)
    batch.run()
    wall = time.monotonic() - start
    busy = {s: sum(e - b for slot, b, e in ev.busy if slot == s) for s in range(slots)}
    first = min(b for _, b, _ in ev.busy) - start
    work = sum(r.stages_s.get("total", 0.0) * scale for k, r in records.items() if k in {p.key for p in problems})
    return {"slots": slots, "problems": len(problems), "wall_s": wall, "check_s": work,
            "first_check_at_s": first, "busy": {s: v / wall for s, v in busy.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, required=True)
    ap.add_argument("--problems", required=True)
    ap.add_argument("--records", type=Path, action="append", required=True)
    ap.add_argument("--slots", type=int, action="append", required=True)
    ap.add_argument("--scale", type=float, default=1.0, help="check time multiplier (1 = as measured)")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if len(args.slots) > 1:  # each slot count in a fresh process: the same imports, caches and start
        rows = []
        for n in args.slots:
            cmd = [sys.executable, __file__, "--root", str(args.root), "--problems", args.problems,
                   "--slots", str(n), "--scale", str(args.scale), "--concurrency", str(args.concurrency),
                   "--out", str(args.out)]
            for run in args.records:
                cmd += ["--records", str(run)]
            line = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[0]
            rows.append(json.loads(line))
            print(line, flush=True)
    else:
        rows = [replay(args.root, args.problems, measured(args.records), args.slots[0], args.scale,
                       args.out / f"slots{args.slots[0]}", args.concurrency)]
        print(json.dumps(rows[0]), flush=True)
    base = rows[0]
    print("| slots | problems | checks s | wall s | first check starts s | busy per slot | throughput vs first row |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        busy = " / ".join(f"{100 * v:.0f} %" for v in r["busy"].values())
        print(f"| {r['slots']} | {r['problems']} | {r['check_s']:.1f} | {r['wall_s']:.1f} | "
              f"{r['first_check_at_s']:.1f} | {busy} | {base['wall_s'] / r['wall_s']:.2f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
