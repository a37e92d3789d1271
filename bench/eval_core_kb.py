"""A KernelBench-style evaluation, written for kiln's benchmark (not KernelBench's code): one fresh
process per candidate, the candidate imported once (one `load_inline` build in a fresh extensions
dir), 5 correctness trials on seeded inputs, then 3 warm-ups and 100 timed runs with CUDA events, a
256 MB L2 thrash before each, one input set reused, the mean reported. The eager reference is timed
the same way in the same process, so the two evaluators' speedups can be compared.

    python bench/eval_core_kb.py PROBLEM CANDIDATE            # prints the result as JSON
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

TRIALS = 5
WARMUP = 3
RUNS = 100
ATOL = RTOL = 1e-4  # fp32


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _time(fn, inputs, torch) -> list[float]:  # type: ignore[no-untyped-def]
    thrash = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    with torch.no_grad():
        for _ in range(WARMUP):
            fn(*inputs)
        torch.cuda.synchronize()
        times = []
        for _ in range(RUNS):
            thrash.zero_()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn(*inputs)
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e) * 1000.0)
    return times


def child(problem: Path, candidate: Path, t_popen: float) -> dict:
    import torch

    torch.zeros(1, device="cuda")
    out: dict = {"stages_s": {"spawn": time.time() - t_popen}}
    t0 = time.perf_counter()
    try:
        cand = _load(candidate, "kb_candidate")
    except Exception as exc:  # noqa: BLE001 - a build failure is the result
        out["stages_s"]["compile"] = time.perf_counter() - t0
        return {**out, "status": "compile_error", "error": str(exc)[-1000:]}
    prob = _load(problem, "kb_problem")
    out["stages_s"]["compile"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    init = prob.get_init_inputs()
    torch.manual_seed(42)
    ref = prob.Model(*init).cuda()
    torch.manual_seed(42)
    new = cand.ModelNew(*init).cuda()
    correct = True
    with torch.no_grad():
        for trial in range(TRIALS):
            torch.manual_seed(1000 + trial)
            inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in prob.get_inputs()]
            a, b = ref(*inputs), new(*inputs)
            correct &= a.shape == b.shape and bool(torch.allclose(a, b, atol=ATOL, rtol=RTOL))
    torch.cuda.synchronize()
    out["stages_s"]["correctness"] = time.perf_counter() - t0
    out["correct"] = correct
    out["status"] = "ok" if correct else "incorrect"
    if correct:
        t0 = time.perf_counter()
        cand_us, ref_us = _time(new, inputs, torch), _time(ref, inputs, torch)
        out["stages_s"]["timing"] = time.perf_counter() - t0
        out["candidate_mean_us"] = sum(cand_us) / len(cand_us)
        out["reference_mean_us"] = sum(ref_us) / len(ref_us)
        out["speedup_vs_eager"] = out["reference_mean_us"] / out["candidate_mean_us"]
    return out


def kb_eval(problem: Path, candidate: Path, *, timeout_s: float = 600.0) -> dict:
    """Run one KernelBench-style evaluation in a fresh process with a fresh extensions dir."""
    with tempfile.TemporaryDirectory(prefix="kb-ext-") as ext, tempfile.TemporaryDirectory(prefix="kb-res-") as rd:
        env = {**os.environ, "TORCH_EXTENSIONS_DIR": ext, "TRITON_CACHE_DIR": str(Path(ext) / "triton")}
        res = Path(rd) / "result.json"
        t0 = time.time()
        p = subprocess.run([sys.executable, __file__, "--child", str(problem), str(candidate), str(res), repr(t0)],
                           env=env, capture_output=True, text=True, timeout=timeout_s)
        wall = time.time() - t0
        out = json.loads(res.read_text()) if res.exists() else {"status": "crashed", "stderr": p.stderr[-1500:]}
    out["total_s"] = wall
    return out


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        result = child(Path(sys.argv[2]), Path(sys.argv[3]), float(sys.argv[5]))
        Path(sys.argv[4]).write_text(json.dumps(result))
    else:
        print(json.dumps(kb_eval(Path(sys.argv[1]), Path(sys.argv[2])), indent=1))
