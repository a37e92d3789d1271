"""Record real profiler output on the GPU machine (for tests/fixtures/ncu/) and measure the profiler.

    . bench/device_env.sh && python3 bench/profile_record.py --out $OUT/rec

For a Triton softmax (memory-bound), a Triton matmul (bf16, compute-bound) and a plain CUDA kernel:
`kiln profile` through the ncu rung (level full, artifacts kept: .ncu-rep, raw/details/source CSV)
and through the forced torch-profiler rung; digests, JSON reports and wall times. Also
`ncu --query-metrics`, the rung probe and the measured peaks. Everything lands in --out; a log
records each step's time and any traceback. Ends with --out/summary.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
import traceback
from pathlib import Path

from kiln.tools import peaks
from kiln.tools.profile import api, collect, metrics, ncu, rung
from kiln.tools.profile.render import render_digest

W = Path(__file__).resolve().parent.parent / "tests" / "profile" / "workloads"
CASES = (("softmax", "softmax_problem.py", "softmax_triton.py", "fp32"),
         ("matmul", "matmul_problem.py", "matmul_triton.py", "bf16"),
         ("scale_cuda", "scale_problem.py", "scale_cuda.py", "fp32"))


class Recorder:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.summary: dict[str, object] = {}
        self.t0 = time.monotonic()

    def log(self, msg: str) -> None:
        line = f"[{time.monotonic() - self.t0:7.1f}s] {msg}"
        print(line, flush=True)
        with (self.out / "log.txt").open("a") as f:
            f.write(line + "\n")

    def step(self, name: str, fn):  # type: ignore[no-untyped-def]
        t = time.monotonic()
        try:
            result = fn()
            self.summary[name] = {"ok": True, "s": round(time.monotonic() - t, 2)}
            self.log(f"{name}: ok in {time.monotonic() - t:.1f}s")
            return result
        except Exception:  # noqa: BLE001 - a recording script keeps going and logs the failure
            self.summary[name] = {"ok": False, "s": round(time.monotonic() - t, 2), "error": traceback.format_exc()[-2000:]}
            self.log(f"{name}: FAILED in {time.monotonic() - t:.1f}s\n{traceback.format_exc()}")
            return None


def env_info(out: Path) -> None:
    text = subprocess.run("nvidia-smi -L; ncu --version; python3 -c 'import torch, triton; "
                          "print(torch.__version__, triton.__version__)'", shell=True, capture_output=True,
                          text=True, check=False)
    (out / "env.txt").write_text(text.stdout + text.stderr)


def query(out: Path, cache: Path) -> dict[str, object]:
    run = ncu.run_ncu(ncu.QUERY_ARGS, timeout_s=90)
    (out / "query_metrics.txt").write_text(run.stdout + run.stderr)
    gpu = rung.gpu_name() or ""
    available = metrics.parse_query_metrics(run.stdout)
    bases = sorted({metrics.base_name(n) for names in metrics.CURATED.values() for n in names} & available)
    suffix = ncu.run_ncu(["--query-metrics", "--query-metrics-mode", "suffix", "--metrics", ",".join(bases)], timeout_s=60)
    (out / "query_metrics_suffix.txt").write_text(suffix.stdout + suffix.stderr)
    mset = metrics.choose_metrics(available, gpu)
    if available:
        metrics.save_cached(cache, mset)
    return mset.model_dump()


def profile_case(rec: Recorder, cache: Path, name: str, prob: str, cand: str, dtype: str, rung_name: str,
                 level: str) -> None:
    tag = f"{name}_{rung_name}_{level}"
    t = time.monotonic()
    report = api.profile_candidate(W / prob, W / cand, level=level, force_rung=rung_name, dtype=dtype,
                                   cache_dir=cache, keep_dir=rec.out / f"work_{tag}", timeout_s=120)
    wall = time.monotonic() - t
    (rec.out / f"{tag}.json").write_text(report.model_dump_json(indent=1))
    digest = render_digest(report)
    (rec.out / f"{tag}.digest.txt").write_text(digest)
    rec.summary[f"{tag}.wall_s"] = round(wall, 2)
    rec.summary[f"{tag}.source"] = report.source
    rec.summary[f"{tag}.bound"] = [(k.name[:40], k.bound, k.roofline_pct) for k in report.kernels]
    rec.log(f"{tag}: source {report.source}, {wall:.1f}s\n{digest}")


def raw_ncu_without_nvtx(rec: Recorder, cache: Path, name: str, prob: str, cand: str, dtype: str) -> None:
    """Only if the NVTX-scoped run produced nothing: the same flags without the range filter."""
    work = rec.out / f"work_{name}_nonvtx"
    work.mkdir(parents=True, exist_ok=True)
    mset = metrics.load_cached(cache, rung.gpu_name() or "") or metrics.unchecked_metrics()
    argv = collect.target_argv(W / prob, W / cand, "ncu", work / "target", dtype)
    args = ncu.profile_args(argv, report=work / "profile.ncu-rep", metrics=mset, level="full")
    args = [a for a in args if a not in ("--nvtx", "--nvtx-include", "kiln_candidate/")]
    run = ncu.run_ncu(args, timeout_s=120, env=collect.target_env(work), cwd=work)
    (work / "ncu.log").write_text(run.stdout[-20000:] + run.stderr[-20000:])
    for page in ("raw", "details", "source"):
        imp = ncu.run_ncu(["--import", str(work / "profile.ncu-rep"), "--csv", "--page", page], timeout_s=60)
        (work / f"{page}.csv").write_text(imp.stdout + imp.stderr)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    cache = a.out / "cache"
    rec = Recorder(a.out)
    rec.step("env", lambda: env_info(a.out))
    rec.step("query_metrics", lambda: query(a.out, cache))
    info = rec.step("detect_rung", lambda: rung.detect_rung(cache))
    if info is not None:
        (a.out / "rung.json").write_text(info.model_dump_json(indent=1))
    rec.step("peaks", lambda: (a.out / "peaks.json").write_text(
        (peaks.get(0) or peaks.known(rung.gpu_name())).model_dump_json(indent=1)))
    for name, prob, cand, dtype in CASES:
        rec.step(f"{name}_ncu", lambda n=name, p=prob, c=cand, d=dtype: profile_case(rec, cache, n, p, c, d, "ncu", "full"))
        if not (a.out / f"work_{name}_ncu_full" / "ncu" / "profile.ncu-rep").is_file():
            rec.step(f"{name}_nonvtx", lambda n=name, p=prob, c=cand, d=dtype: raw_ncu_without_nvtx(rec, cache, n, p, c, d))
        rec.step(f"{name}_torch", lambda n=name, p=prob, c=cand, d=dtype: profile_case(
            rec, cache, n, p, c, d, "torch_profiler", "quick"))
    rec.step("softmax_ncu_quick", lambda: profile_case(rec, cache, *CASES[0], "ncu", "quick"))
    (a.out / "summary.json").write_text(json.dumps(rec.summary, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
