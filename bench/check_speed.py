"""Issue 11's check-time figures on the H200: `kiln check` of a Triton candidate (softmax 16384x4096
fp32, bench/eval_core_cases/), each row a fresh `kiln check` process unless it says otherwise.

  cold_empty     empty kiln cache: peaks measured, baselines timed (torch.compile compiled), Triton cold
  cold_new_src   caches warm, a candidate source never seen (its Triton compile is cold)
  again          the same problem and candidate again (everything cached; the resident fork server
                 that cold_empty started forks the workers: a fresh process waits for none)
  again_own      as `again`, with KILN_FORK_SERVER=process (the process starts its own fork server)
  no_bwrap       as `again`, with the bwrap outer layer unavailable (best-effort: what the sandbox costs)
  in_process     two checks in one process through LocalEvaluator (fork server warm), the second timed

    . bench/device_env.sh && python3 bench/check_speed.py --out $OUT [--bwrap PATH]

Targets: cold <= 8 s, again <= 3 s. Writes check_speed.json and check_speed.md under --out.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = Path(__file__).resolve().parent / "eval_core_cases"
PROBLEM = CASES / "softmax_problem.py"
CANDIDATE = CASES / "softmax_triton.py"


def variant(tmp: Path, tag: str) -> Path:
    """The candidate with a comment that changes its source hash (a source kiln has never seen)."""
    path = tmp / f"softmax_triton_{tag}.py"
    path.write_text(CANDIDATE.read_text() + f"\n# variant {tag}\n")
    return path


def kiln_check(cand: Path, cache: Path, extra: list[str], env_extra: dict[str, str] | None = None) -> dict:
    out = cand.with_suffix(f".{time.monotonic_ns()}.json")
    env = {**os.environ, "KILN_CACHE_DIR": str(cache), **(env_extra or {})}
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "kiln.evals.cli", "check", str(PROBLEM), str(cand), "--device", "cuda",
                           "--json", str(out), *extra], capture_output=True, text=True, env=env, timeout=900)
    wall = time.monotonic() - t0
    rec = json.loads(out.read_text()) if out.exists() else {}
    return {"wall_s": round(wall, 2), "rc": proc.returncode, "status": rec.get("status"),
            "stages_s": rec.get("stages_s"), "isolation": (rec.get("isolation") or {}),
            "speedups": {k: round(v["value"], 3) for k, v in ((rec.get("timing") or {}).get("speedups") or {}).items()},
            "baselines_cached": (rec.get("evidence") or {}).get("baselines_cached"),
            "fork_server": (rec.get("evidence") or {}).get("fork_server"),
            "timing": {k: v for k, v in ((rec.get("integrity") or {}).get("timing") or {}).items()
                       if v not in (None, "") and k in ("n_laps", "slots", "deferred_us_per_call", "cand_refresh_s",
                                                        "cand_commit_s", "base_refresh_s", "base_commit_s",
                                                        "timed_outputs_checked", "timed_outputs_failed", "audit_worst")},
            "candidate_us": ((rec.get("timing") or {}).get("candidate") or {}).get("median_us"),
            "baselines_us": {k: v.get("median_us") for k, v in ((rec.get("timing") or {}).get("baselines") or {}).items()},
            "reasons": rec.get("reasons", [])[:3], "stderr": proc.stderr[-500:]}


def in_process(tmp: Path, cache: Path) -> dict:
    os.environ["KILN_CACHE_DIR"] = str(cache)
    from kiln.tools.check import LocalEvaluator
    from kiln.tools.records import CheckOptions

    ev = LocalEvaluator(CheckOptions(device="cuda"))
    ev.check(PROBLEM, variant(tmp, "inproc1"))
    t0 = time.monotonic()
    rec = ev.check(PROBLEM, variant(tmp, "inproc2"))
    t1 = time.monotonic()
    again = ev.check(PROBLEM, variant(tmp, "inproc2"))
    return {"new_source_s": round(t1 - t0, 2), "same_source_s": round(time.monotonic() - t1, 2),
            "status": rec.status, "stages_s": rec.stages_s, "again_stages_s": again.stages_s}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--bwrap", default=None, help="bubblewrap binary (the GPU image has none installed)")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="kiln-speed-"))
    cache = tmp / "cache"
    extra = ["--bwrap", a.bwrap] if a.bwrap else []
    res: dict = {}

    def keep(name: str, row: dict) -> None:  # each row on disk as it comes: a cut-off run keeps what it measured
        res[name] = row
        (a.out / "check_speed.json").write_text(json.dumps(res, indent=1))
        print(name, json.dumps(row)[:400], flush=True)

    keep("cold_empty", kiln_check(variant(tmp, "a"), cache, extra))
    keep("cold_new_src", kiln_check(variant(tmp, "b"), cache, extra))
    keep("again", kiln_check(variant(tmp, "b"), cache, extra))
    keep("again_2", kiln_check(variant(tmp, "b"), cache, extra))
    keep("again_own", kiln_check(variant(tmp, "b"), cache, extra, {"KILN_FORK_SERVER": "process"}))
    keep("no_bwrap", kiln_check(variant(tmp, "b"), cache, ["--bwrap", str(tmp / "no-bwrap-here")]))
    keep("in_process", in_process(tmp, cache))
    lines = ["| run | wall s | status | fork server (kind) | spawn | compile | correctness | integrity | timing | isolation |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in res.items():
        if name == "in_process":
            continue
        st = r.get("stages_s") or {}
        lines.append(f"| {name} | {r['wall_s']} | {r['status']} | " + " | ".join(
            (f"{st.get(k, '')} ({r.get('fork_server')})" if k == "fork_server" else str(st.get(k, "")))
            for k in ("fork_server", "spawn", "compile", "correctness", "integrity", "timing"))
            + f" | {r['isolation'].get('level', r['isolation'].get('in_force', ''))} |")
    ip = res["in_process"]
    lines.append(f"\nin one process (LocalEvaluator, fork server warm): new source {ip['new_source_s']} s, "
                 f"same source again {ip['same_source_s']} s")
    (a.out / "check_speed.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
