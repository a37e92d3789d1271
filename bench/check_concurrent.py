"""Issue 22's concurrency and throughput figures on one GPU: N `kiln check` processes at once (each a
fresh process, its own candidate source), and a reward burst of small checks through
`kiln.rewards.KilnReward` (`checks_per_gpu` = --threads). Rows land on disk as they come.

    . bench/device_env.sh && python3 bench/check_concurrent.py --out $OUT/concurrent --jobs 6

Targets: 6 at once, 0 timeouts and 0 OOM, each check's wall at most 2x the solo figure; >= 100
verified checks per minute for small problems. The burst times as kiln.rewards does (REWARD_TIMING:
3 % CI or 0.4 s a function; --full-timing: a full check's 1 % or 1.5 s); timing stages take the GPU's
lock, one at a time, while compiles and trials overlap.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROBLEM = HERE / "eval_core_cases" / "softmax_problem.py"
CANDIDATE = HERE / "eval_core_cases" / "softmax_triton.py"
SMALL = HERE.parent / "tests" / "fixtures" / "problems" / "relu.py"
SMALL_CAND = HERE.parent / "tests" / "fixtures" / "kernels" / "correct" / "triton" / "relu.py"


def variant(tmp: Path, src: Path, tag: str) -> Path:
    path = tmp / f"{src.stem}_{tag}.py"
    path.write_text(src.read_text() + f"\n# variant {tag}\n")
    return path


def one_check(problem: Path, cand: Path, cache: Path, extra: list[str]) -> dict:
    out = cand.with_suffix(f".{time.monotonic_ns()}.json")
    env = {**os.environ, "KILN_CACHE_DIR": str(cache)}
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "kiln.evals.cli", "check", str(problem), str(cand), "--device", "cuda",
                           "--json", str(out), *extra], capture_output=True, text=True, env=env, timeout=900)
    rec = json.loads(out.read_text()) if out.exists() else {}
    return {"wall_s": round(time.monotonic() - t0, 2), "rc": proc.returncode, "status": rec.get("status"),
            "stages_s": rec.get("stages_s"), "reasons": rec.get("reasons", [])[:2],
            "speedup_eager": ((rec.get("timing") or {}).get("speedups") or {}).get("eager", {}).get("value"),
            "stderr": proc.stderr[-300:]}


def burst(tmp: Path, cache: Path, n: int, threads: int, reward_timing: bool = True) -> dict:
    """n small checks (a new candidate source each) through `kiln.rewards.KilnReward`, as a trainer
    calls it: one batch, `threads` checks in flight on GPU 0 (`checks_per_gpu`), in one process."""
    os.environ["KILN_CACHE_DIR"] = str(cache)
    from kiln.rewards.callable import REWARD_TIMING, KilnReward
    from kiln.tools.records import CheckOptions

    options = CheckOptions(baselines=["eager"], **(REWARD_TIMING if reward_timing else {}))
    reward = KilnReward(device="cuda", options=options, checks_per_gpu=threads, max_workers=threads)
    problem = SMALL.read_text()
    reward.check_batch([problem], [variant(tmp, SMALL_CAND, "warm").read_text()])  # fork server, eager cached
    codes = [variant(tmp, SMALL_CAND, f"b{i}").read_text() for i in range(n)]
    t0 = time.monotonic()
    recs = reward.check_batch([problem] * n, codes)
    wall = time.monotonic() - t0
    stages: dict[str, list[float]] = {}
    for r in recs:  # where a check's time went: the mean of each stage over the burst
        for k, v in (r.stages_s or {}).items():
            stages.setdefault(k, []).append(float(v))
    laps: dict[str, list[float]] = {}
    for r in recs:  # the timing stage's inside: laps, slots, a lap's refresh and commit seconds (medians)
        ti = r.integrity.timing if r.integrity else None
        for k in ("n_laps", "slots", "cand_refresh_s", "cand_commit_s", "base_refresh_s", "base_commit_s",
                  "deferred_us_per_call", "uncharged_us_per_call"):
            if ti is not None and getattr(ti, k, None) is not None:
                laps.setdefault(k, []).append(float(getattr(ti, k)))
        if r.timing and r.timing.candidate and ti is not None and ti.slots:
            laps.setdefault("cand_lap_s", []).append(r.timing.candidate.median_us * ti.slots * 1e-6)
        if ti is not None:  # the share of checks whose cached eager steps would have charged: timed again
            laps.setdefault("base_steps_now", []).append(float(ti.base_steps_now))
    return {"n": n, "threads": threads, "wall_s": round(wall, 2), "per_minute": round(60 * n / wall, 1),
            "mean_timing": {k: round(statistics.fmean(v), 4) for k, v in laps.items()},
            "statuses": sorted({r.status for r in recs}), "ok": sum(r.status == "ok" for r in recs),
            "mean_stages_s": {k: round(statistics.fmean(v), 3) for k, v in stages.items()},
            "reasons": sorted({x for r in recs for x in r.reasons[:1]})[:3]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--jobs", type=int, default=6)
    ap.add_argument("--burst", type=int, default=120)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--burst-only", action="store_true", help="leave out the N-at-once part")
    ap.add_argument("--full-timing", action="store_true", help="the burst with a full check's timing, not "
                                                               "kiln.rewards' (REWARD_TIMING)")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="kiln-conc-"))
    cache = tmp / "cache"
    res: dict = {}

    def keep(name: str, row: object) -> None:
        res[name] = row
        (a.out / "concurrent.json").write_text(json.dumps(res, indent=1))
        print(name, json.dumps(row)[:600], flush=True)

    summary: dict = {}
    if not a.burst_only:
        keep("solo_warmup", one_check(PROBLEM, variant(tmp, CANDIDATE, "w"), cache, []))  # caches filled
        keep("solo", one_check(PROBLEM, variant(tmp, CANDIDATE, "s"), cache, []))
        with ThreadPoolExecutor(a.jobs) as pool:
            rows = list(pool.map(lambda i: one_check(PROBLEM, variant(tmp, CANDIDATE, f"c{i}"), cache, []),
                                 range(a.jobs)))
        keep("concurrent", rows)
        walls = [r["wall_s"] for r in rows]
        summary = {"jobs": a.jobs, "solo_s": res["solo"]["wall_s"], "median_s": statistics.median(walls),
                   "max_s": max(walls), "timeouts": sum(r["status"] == "timeout" for r in rows),
                   "errors": sum(r["status"] not in ("ok",) for r in rows),
                   "oom": sum("out of memory" in " ".join(r["reasons"]).lower() for r in rows)}
        keep("summary", summary)
    rt = not a.full_timing
    keep("burst_serial", burst(tmp, cache / "burst", max(8, a.burst // 8), 1, rt))  # one check's latency, alone
    keep("burst", burst(tmp, cache / "burst", a.burst, a.threads, rt))
    lines = ["| figure | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in summary.items()]
    b = res["burst"]
    lines.append(f"| reward burst ({'full' if a.full_timing else 'reward'} timing): {b['n']} small checks, "
                 f"{b['threads']} threads | {b['per_minute']} per minute, "
                 f"{b['ok']} ok, statuses {b['statuses']} |")
    b1 = res["burst_serial"]
    lines.append(f"| the same, one thread ({b1['n']} checks) | {b1['per_minute']} per minute, {b1['ok']} ok, "
                 f"mean stages {b1['mean_stages_s']} |")
    lines.append(f"| reward burst's mean stages | {b['mean_stages_s']} |")
    (a.out / "concurrent.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
