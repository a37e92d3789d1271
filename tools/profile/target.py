"""The program the profilers run: load a problem and a candidate, warm up, then run the candidate's
forward once inside an NVTX range (ncu rung) or under the torch profiler (fallback rung).

Run as `python -m kiln.tools.profile.target --problem P --candidate C --mode ncu|torch --out DIR`.
It writes DIR/target.json (compiled-kernel metadata, CUDA sources, counted work, forward time) and,
in torch mode, DIR/trace.json (the profiler's Chrome trace: one event per kernel launch).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from kiln.tools.files import load_module

RANGE = "kiln_candidate"
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def build(problem: ModuleType, candidate: ModuleType, dtype: str, device: str) -> tuple[Any, Any, tuple]:
    import torch

    tdt = getattr(torch, DTYPES[dtype])
    torch.manual_seed(0)
    ref = problem.Model(*problem.get_init_inputs())
    torch.manual_seed(0)
    new = candidate.ModelNew(*problem.get_init_inputs())
    inputs = tuple(
        (x.to(device=device, dtype=tdt) if x.is_floating_point() else x.to(device)) if torch.is_tensor(x) else x
        for x in problem.get_inputs()
    )
    return ref.to(device=device, dtype=tdt), new.to(device=device, dtype=tdt), inputs


def count_work(ref: Any, inputs: tuple) -> dict[str, int | None]:
    """Bytes that must move and FLOPs: kiln's one work counter (`kiln.tools.integrity.physics`), the
    same numbers the physics floor of a check uses, so the roofline and the floor agree."""
    from kiln.tools.integrity.physics import count_work as physics_work

    nbytes, flops = physics_work(ref, inputs)
    return {"bytes": int(nbytes), "flops": flops}


def _unwrap_jit(obj: Any) -> Any:
    for _ in range(4):
        if hasattr(obj, "device_caches") or not hasattr(obj, "fn"):
            break
        obj = obj.fn
    return obj if hasattr(obj, "device_caches") else None


def triton_kernels(candidate: ModuleType, out_dir: Path) -> list[dict[str, Any]]:
    """Compiled Triton kernels of the candidate module: registers, spills, shared memory, warps,
    stages, and the cubin written next to target.json for the SASS summary."""
    found: list[dict[str, Any]] = []
    for obj in list(vars(candidate).values()):
        jit = _unwrap_jit(obj)
        if jit is None:
            continue
        try:
            for caches in jit.device_caches.values():
                found += [_kernel_meta(kernel, out_dir) for kernel in caches[0].values()]
        except Exception as exc:  # noqa: BLE001 - Triton internals move between versions; metadata is optional
            print(f"kiln profile: no Triton metadata for {obj!r}: {exc}", file=sys.stderr)
    return found


def _kernel_meta(kernel: Any, out_dir: Path) -> dict[str, Any]:
    md = kernel.metadata
    name = getattr(md, "name", None) or getattr(kernel, "name", "kernel")
    cubin = kernel.asm.get("cubin") if hasattr(kernel, "asm") else None
    path = None
    if isinstance(cubin, bytes):
        path = out_dir / f"{name}.cubin"
        path.write_bytes(cubin)
    return {
        "name": name, "n_regs": getattr(kernel, "n_regs", None), "n_spills": getattr(kernel, "n_spills", None),
        "shared": getattr(md, "shared", None), "num_warps": getattr(md, "num_warps", None),
        "num_stages": getattr(md, "num_stages", None), "cubin": str(path) if path else None,
    }


def cuda_sources(candidate: ModuleType) -> list[str]:
    """Module-level strings holding CUDA kernels (load_inline, NVRTC, CuPy, kiln's fast path)."""
    return [v for v in vars(candidate).values() if isinstance(v, str) and "__global__" in v]


def extension_files(candidate: ModuleType) -> list[str]:
    """Shared objects of compiled extensions the candidate holds (load_inline modules)."""
    files = []
    for v in vars(candidate).values():
        f = getattr(v, "__file__", None) if isinstance(v, ModuleType) else None
        if f and f.endswith(".so"):
            files.append(f)
    return files


def time_forward(model: Any, inputs: tuple, reps: int) -> float:
    import torch

    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        model(*inputs)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(times)


def run_ncu_mode(model: Any, inputs: tuple) -> None:
    import torch

    try:
        import nvtx

        ctx: Any = nvtx.annotate(RANGE)
    except ImportError:  # the torch build's own NVTX bindings push the same default-domain range
        ctx = torch.cuda.nvtx.range(RANGE)
    with torch.no_grad(), ctx:
        model(*inputs)
        torch.cuda.synchronize()


def run_torch_mode(model: Any, inputs: tuple, out_dir: Path, reps: int) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            model(*inputs)
        torch.cuda.synchronize()
    prof.export_chrome_trace(str(out_dir / "trace.json"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kiln.tools.profile.target")
    ap.add_argument("--problem", type=Path, required=True)
    ap.add_argument("--candidate", type=Path, required=True)
    ap.add_argument("--mode", choices=["ncu", "torch"], required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="fp32")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args(argv)
    import torch

    a.out.mkdir(parents=True, exist_ok=True)
    problem = load_module(a.problem.resolve(), "kiln_profile_problem")
    candidate = load_module(a.candidate.resolve(), "kiln_profile_candidate")
    ref, new, inputs = build(problem, candidate, a.dtype, "cuda")
    with torch.no_grad():
        for _ in range(2):  # JIT compile and autotune outside the profiled range
            new(*inputs)
        torch.cuda.synchronize()
        work = count_work(ref, inputs)
        forward_us = time_forward(new, inputs, 20) if a.mode == "torch" else None
    if a.mode == "ncu":
        run_ncu_mode(new, inputs)
    else:
        run_torch_mode(new, inputs, a.out, a.reps)
    info = {
        "gpu_name": torch.cuda.get_device_name(), "sm_count": torch.cuda.get_device_properties(0).multi_processor_count,
        "arch": "sm_{}{}".format(*torch.cuda.get_device_capability()), "work": work, "forward_us": forward_us,
        "reps": a.reps if a.mode == "torch" else 1, "triton_kernels": triton_kernels(candidate, a.out),
        "cuda_sources": cuda_sources(candidate), "extension_files": extension_files(candidate),
    }
    (a.out / "target.json").write_text(json.dumps(info, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
