"""What a check whose cached eager steps would charge the candidate holds the timing lock for, on the
CPU protocol (`time_on_cpu`: the CPU machine's plumbing, not a GPU's figures): eager is measured and
cached, the cache's refresh + commit figures are zeroed (so every check is charged by them), and the
candidate is checked again `--runs` times. Each row: the lock held, the timing stage's parts.

    .venv/bin/python bench/charged_steps.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "core" / "data"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    os.environ["KILN_CACHE_DIR"] = tempfile.mkdtemp(prefix="kiln-charged-")
    from kiln.tools.check import caches, check
    from kiln.tools.records import CheckOptions

    caches.gpu_identity = lambda index: "cpu (bench)"  # baselines are cached on a GPU only
    opts = CheckOptions(device="cpu", trials=1, timeout_s=120, timing_timeout_s=4.0, time_on_cpu=True, baselines=["eager"])
    first = check(DATA / "add_problem.py", DATA / "add_triton.py", opts)
    assert first.status == "ok", first.reasons
    (path,) = (Path(os.environ["KILN_CACHE_DIR"]) / "baselines").glob("*.json")
    data = json.loads(path.read_text())
    locked, parts = [], []
    for _ in range(a.runs):
        path.write_text(json.dumps({**data, "overhead_s": [0.0] * 8, "refresh_s": 0.0, "commit_s": 0.0}))
        rec = check(DATA / "add_problem.py", DATA / "add_triton.py", opts)
        assert rec.status == "ok", rec.reasons
        locked.append(rec.stages_s["timing_locked"])
        parts.append({k.removeprefix("timing."): v for k, v in rec.stages_s.items() if k.startswith("timing.")})
        print(json.dumps({"timing_locked": locked[-1], "parts": parts[-1], "cached": rec.evidence.baselines_cached}))
    print(f"median lock held: {statistics.median(locked):.3f} s over {a.runs} charged checks")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
