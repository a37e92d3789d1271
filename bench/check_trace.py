"""Where does one `kiln check` spend its time? Runs `check()` N times in one process (the first with a
cold compile cache and a fresh fork server, the rest warm), with the workers under cProfile, and
writes per-check stage times, each worker's step-by-step trace (consecutive steps, trial numbers
folded together) and the top functions by cumulative time.

    . bench/device_env.sh && python bench/check_trace.py --out $OUT/trace [--n 4] [--baselines eager,compile]
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

CASES = Path(__file__).resolve().parent / "eval_core_cases"


def fold(trace: list) -> dict[str, float]:
    """Seconds per step, from consecutive trace entries, trial/distribution numbers folded."""
    out: dict[str, float] = defaultdict(float)
    for (t0, name, detail), (t1, _n, _d) in zip(trace, trace[1:], strict=False):
        key = f"{name}: " + re.sub(r"/(x1|x3|x0\.01|neg)/trial \d+", "/*", detail or "")
        out[key] += t1 - t0
    return dict(out)


def top_functions(path: Path, n: int = 25) -> str:
    import io

    buf = io.StringIO()
    st = pstats.Stats(str(path), stream=buf)
    st.sort_stats("cumulative").print_stats(n)
    return buf.getvalue()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--problem", type=Path, default=CASES / "softmax_problem.py")
    ap.add_argument("--candidate", type=Path, default=CASES / "softmax_triton.py")
    ap.add_argument("--baselines", default=None, help="comma list; default: kiln's default baselines")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()

    from kiln.tools.check import check
    from kiln.tools.records import CheckOptions

    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("KILN_CACHE_DIR", tempfile.mkdtemp(prefix="kiln-trace-cache-"))
    rows = []
    # one profile dir for the whole run: the fork server mounts it when it starts (a dir named later is
    # not writable in its workers, which then die at their first step); each check's files move out after
    live = args.out / "profiles"
    live.mkdir(parents=True, exist_ok=True)
    os.environ["KILN_PROFILE_WORKERS"] = str(live)
    for i in range(args.n):
        prof = args.out / f"check{i}"
        prof.mkdir(exist_ok=True)
        opts = CheckOptions(device=args.device)
        if args.baselines is not None:
            opts.baselines = [b for b in args.baselines.split(",") if b]  # type: ignore[assignment]
        t0 = time.perf_counter()
        rec = check(args.problem, args.candidate, opts)
        wall = time.perf_counter() - t0
        for f in live.iterdir():  # workers still alive (a cached baseline's) write again into `live`
            if f.suffix in (".pstats", ".json"):
                f.replace(prof / f.name)
        row = {"i": i, "status": rec.status, "wall_s": round(wall, 3), "stages_s": rec.stages_s,
               "reasons": rec.reasons[:3]}
        if rec.timing and rec.timing.candidate:
            row["candidate_us"] = rec.timing.candidate.median_us
            row["n_samples"] = rec.timing.candidate.n_samples
            row["speedups"] = {k: round(s.value, 3) for k, s in rec.timing.speedups.items()}
        for res in sorted(prof.glob("*.result.json")):
            data = json.loads(res.read_text())
            row[f"steps_{data['role']}"] = {k: round(v, 3) for k, v in sorted(fold(data.get("trace", [])).items(),
                                                                              key=lambda kv: -kv[1])}
        from kiln.tools.sandbox import zygote

        row["fork_server_skipped"] = sorted({m for z in zygote._POOL.values() for m in getattr(z, "skipped", [])})
        rows.append(row)
        print(json.dumps({k: row[k] for k in ("i", "status", "wall_s", "stages_s", "fork_server_skipped")}), flush=True)
        (args.out / "trace.json").write_text(json.dumps(rows, indent=1))
    lines = [f"walls: {[r['wall_s'] for r in rows]}; median of warm: "
             f"{statistics.median([r['wall_s'] for r in rows[1:]] or [rows[0]['wall_s']]):.2f} s", ""]
    for r in rows:
        lines.append(json.dumps(r, indent=1))
    last = args.out / f"check{args.n - 1}"
    for p in sorted(last.glob("*.pstats")):
        lines += ["", f"== {p.name}", top_functions(p)]
    (args.out / "trace.md").write_text("\n".join(lines))
    print("\n".join(lines[:1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
