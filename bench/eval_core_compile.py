"""Compile-path figures on the GPU machine: NVRTC vs nvcc -cubin for fast-path kernels, load_inline
cold builds of one kernel in three forms (KernelBench's; kiln's with load_inline's implicit torch
header in the .cu; kiln's with no_implicit_headers=True) and kiln's cached, and several candidates
compiling in parallel.

    . bench/device_env.sh && python bench/eval_core_compile.py --out $OUT --budget-s 120

Writes eval_core_compile.json and eval_core_compile.md under --out. Every load_inline build runs in
its own fresh subprocess through kiln.tools.compile.import_candidate, as the worker does.
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

ROOT = Path(__file__).resolve().parents[1]
CUDA_DIR = ROOT / "tests" / "fixtures" / "kernels" / "correct" / "cuda"
CASES = ROOT / "bench" / "eval_core_cases"
FORMS = {  # the same softmax kernel in three load_inline forms
    "kernelbench": CASES / "softmax_load_inline_kb.py",  # torch headers and glue in the .cu
    "kiln_implicit_headers": CASES / "softmax_load_inline_kiln_implicit.py",  # load_inline still adds torch/types.h to the .cu
    "kiln": CASES / "softmax_load_inline_kiln.py",  # no_implicit_headers=True, light C++ headers
}
KILN_FORM = FORMS["kiln"]

_IMPORT = """
import json, sys, time
from pathlib import Path
from kiln.tools.compile import import_candidate
t0 = time.perf_counter()
mod, rec = import_candidate(Path(sys.argv[1]), device="cuda", cache_root=Path(sys.argv[2]))
print(json.dumps({"ok": rec.ok, "cached": rec.cached, "compile_s": rec.compile_s, "errors": rec.errors[:2]}))
"""


def import_in_subprocess(cand: Path, cache: Path) -> dict:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", _IMPORT, str(cand), str(cache)], capture_output=True, text=True,
                       timeout=300)
    wall = time.perf_counter() - t0
    try:
        out = json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        out = {"ok": False, "errors": [p.stderr[-500:]]}
    return {**out, "process_wall_s": round(wall, 2)}


def fast_path_figures(arch: str) -> list[dict]:
    from kiln.tools import cuda
    from kiln.tools.compile import extract_cuda_sources

    rows = []
    for cand in sorted(CUDA_DIR.glob("*_fast.py")):
        src = extract_cuda_sources(cand.read_text())["kernel"][0]
        row: dict = {"kernel": cand.stem}
        for label, fn in (("nvrtc_s", cuda.nvrtc_compile), ("nvcc_cubin_s", cuda.nvcc_cubin)):
            t0 = time.perf_counter()
            try:
                fn(src, arch)
                row[label] = round(time.perf_counter() - t0, 3)
            except Exception as exc:  # noqa: BLE001 - record, keep going
                row[label] = f"error: {str(exc)[:200]}"
        rows.append(row)
    return rows


def _variant(src: Path, i: int, tmp: Path) -> Path:
    """A copy whose source hash differs (a trailing comment), so it builds cold in its own dir."""
    p = tmp / f"{src.stem}_v{i}.py"
    p.write_text(src.read_text() + f"\n# variant {i} {time.time_ns()}\n")
    return p


def parallel_fast(arch: str, n: int, tmp: Path) -> dict:
    from kiln.tools import cuda

    base = (CUDA_DIR / "row_softmax_fast.py").read_text()
    from kiln.tools.compile import extract_cuda_sources

    src = extract_cuda_sources(base)["kernel"][0]
    cuda.set_cache_dir(tmp / "par-cubin")
    t0 = time.perf_counter()
    with ThreadPoolExecutor(n) as ex:  # NVRTC releases the GIL while compiling
        recs = list(ex.map(lambda i: cuda.compile_cubin(src + f"\n// v{i}\n", arch)[1], range(n)))
    return {"n": n, "wall_s": round(time.perf_counter() - t0, 2), "each_s": [round(r.compile_s or 0, 2) for r in recs]}


def load_inline_forms(tmp: Path) -> dict:
    """Cold build of each form (fresh source hash, fresh dir), one after another, then kiln's cached."""
    out = {name: import_in_subprocess(_variant(path, 1000 + i, tmp), tmp / "forms") for i, (name, path)
           in enumerate(FORMS.items())}
    out["kiln_cached"] = import_in_subprocess(sorted(tmp.glob(f"{KILN_FORM.stem}_v1002.py"))[0], tmp / "forms")
    return out


def parallel_load_inline(n: int, tmp: Path) -> dict:
    cands = [_variant(KILN_FORM, i, tmp) for i in range(n)]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(n) as ex:
        outs = list(ex.map(lambda c: import_in_subprocess(c, tmp / "par-li"), cands))
    return {"n": n, "wall_s": round(time.perf_counter() - t0, 1), "each": outs}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/out")))
    ap.add_argument("--budget-s", type=float, default=300.0)
    ap.add_argument("--parallel", type=int, default=4)
    args = ap.parse_args()
    import torch

    from kiln.tools.gpuenv import env_record

    t_start = time.perf_counter()
    major, minor = torch.cuda.get_device_capability()
    arch = f"sm_{major}{minor}"
    res: dict = {"env": env_record("cuda").model_dump(), "arch": arch, "cpu_count": os.cpu_count()}
    tmp = Path(tempfile.mkdtemp(prefix="kiln-bench-"))
    res["fast_path"] = fast_path_figures(arch)
    res["parallel_fast"] = parallel_fast(arch, 8, tmp)
    steps = [("load_inline_forms", lambda: load_inline_forms(tmp)),
             ("parallel_load_inline", lambda: parallel_load_inline(args.parallel, tmp))]
    for name, fn in steps:
        if time.perf_counter() - t_start > args.budget_s:
            res[name] = "skipped: out of budget"
            continue
        res[name] = fn()
        _write(args.out, res)
    res["total_s"] = round(time.perf_counter() - t_start, 1)
    _write(args.out, res)
    print(json.dumps(res, indent=1))


def _write(out: Path, res: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "eval_core_compile.json").write_text(json.dumps(res, indent=1))
    lines = ["| figure | value |", "|---|---|"]
    for k, v in res.items():
        if k != "env":
            lines.append(f"| {k} | `{json.dumps(v)[:300]}` |")
    (out / "eval_core_compile.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
