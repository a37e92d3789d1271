"""Compile-only view of Triton kernels on a machine with no GPU.

Run as `python -m kiln.tools.profile.static_triton --problem P --candidate C --out DIR [--dtype D]`
with TRITON_INTERPRET=1: the candidate's forward runs once on CPU tensors with Triton's interpreter
launch replaced by a recorder (kernels are not executed, so outputs are garbage and a kernel whose
launch depends on another's results is missed), and the same kernels are then built for sm_90 offline
(`triton.compile` with a GPUTarget), with the launch's constexprs, num_warps/num_stages and the
16-byte alignment specialization a GPU launch would get. The cubins and a target.json in the GPU
rungs' format land in DIR, so the SASS summary and compiled metadata work as on a GPU.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path
from typing import Any

from kiln.tools.files import load_module

CALLS: list[tuple[Any, tuple, dict[str, Any]]] = []
OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int8": "i8",
          "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "bool": "i1"}


def install_recorder() -> None:
    """Replace the interpreter's launch: record each launch's arguments and skip running it (GPU-sized
    problems take minutes in the interpreter; only the arguments matter here)."""
    from triton.runtime.interpreter import InterpretedFunction

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
        CALLS.append((self.fn, args, dict(kwargs)))

    InterpretedFunction.run = run


def _scalar_type(v: Any) -> str:
    if isinstance(v, bool):
        return "i1"
    if isinstance(v, int):
        return "i32" if -(2**31) <= v < 2**31 else "i64"
    return "fp32"


def specialize(names: list[str], constexpr: set[str], fn: Any, args: tuple, kwargs: dict[str, Any],
               float_dtype: str) -> dict[str, Any]:
    """The signature, constexprs, alignment attributes and options a GPU launch with these arguments
    would compile with (JSON-ready)."""
    import torch

    bound = inspect.signature(fn).bind(*args, **{k: v for k, v in kwargs.items() if k in names})
    bound.apply_defaults()
    sig: dict[str, str] = {}
    const: dict[str, Any] = {}
    aligned: list[int] = []
    for i, name in enumerate(names):
        v = bound.arguments[name]
        if name in constexpr or v is None or (isinstance(v, int) and not isinstance(v, bool) and v == 1):
            sig[name], const[name] = "constexpr", v
        elif torch.is_tensor(v):
            dt = DTYPES.get(str(v.dtype).removeprefix("torch."), "fp32")
            sig[name] = "*" + (float_dtype if v.is_floating_point() else dt)
            if v.data_ptr() % 16 == 0:
                aligned.append(i)
        else:
            sig[name] = _scalar_type(v)
            if isinstance(v, int) and not isinstance(v, bool) and v % 16 == 0:
                aligned.append(i)
    return {"signature": sig, "constexprs": const, "aligned": aligned,
            "options": {k: kwargs[k] for k in OPTIONS if k in kwargs}}


def record(problem: Path, candidate: Path, out: Path, float_dtype: str) -> None:
    """Phase 1 (TRITON_INTERPRET=1): run the forward with launches recorded; write calls.json, work."""
    import torch

    install_recorder()
    prob = load_module(problem, "kiln_static_problem")
    cand = load_module(candidate, "kiln_static_candidate")
    torch.manual_seed(0)
    ref, new = prob.Model(*prob.get_init_inputs()), cand.ModelNew(*prob.get_init_inputs())
    inputs = tuple(prob.get_inputs())
    with torch.no_grad():
        new(*inputs)
    calls: dict[str, Any] = {}
    for fn, args, kwargs in CALLS:
        if fn.__name__ not in calls:
            params = inspect.signature(fn).parameters
            names = list(params)
            constexpr = {n for n, p in params.items() if "constexpr" in str(p.annotation)}
            calls[fn.__name__] = specialize(names, constexpr, fn, args, kwargs, float_dtype)
    del ref  # no reference run: a GPU-sized problem can take long on CPU, and there is no time to compare with
    (out / "calls.json").write_text(json.dumps({"calls": calls, "work": {}}, indent=1))


def build(candidate: Path, out: Path, arch: int) -> None:
    """Phase 2 (no interpreter): import the candidate, compile each recorded kernel for the target arch."""
    import triton
    from triton.backends.compiler import GPUTarget

    rec = json.loads((out / "calls.json").read_text())
    cand = load_module(candidate, "kiln_static_candidate")
    kernels, errors = [], []
    for name, spec in rec["calls"].items():
        try:
            kernels.append(_compile(triton, GPUTarget("cuda", arch, 32), getattr(cand, name), spec, out))
        except Exception as exc:  # noqa: BLE001 - a kernel that will not build offline is a note, not a crash
            errors.append(f"{name}: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
    info = {"gpu_name": None, "sm_count": None, "arch": f"sm_{arch}", "work": rec["work"], "forward_us": None,
            "reps": 1, "triton_kernels": kernels, "cuda_sources": [], "extension_files": [], "errors": errors}
    (out / "target.json").write_text(json.dumps(info, indent=1))


def _compile(triton: Any, target: Any, jit: Any, spec: dict[str, Any], out: Path) -> dict[str, Any]:
    while not hasattr(jit, "params") and hasattr(jit, "fn"):  # autotuner / heuristics wrappers
        jit = jit.fn
    attrs = {(i,): [["tt.divisibility", 16]] for i in spec["aligned"]}
    src = triton.compiler.ASTSource(fn=jit, signature=spec["signature"], constexprs=spec["constexprs"], attrs=attrs)
    kernel = triton.compile(src, target=target, options=spec["options"])
    md = kernel.metadata
    path = out / f"{md.name}.cubin"
    path.write_bytes(kernel.asm["cubin"])
    return {"name": md.name, "n_regs": None, "n_spills": None, "shared": md.shared, "num_warps": md.num_warps,
            "num_stages": md.num_stages, "cubin": str(path)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kiln.tools.profile.static_triton")
    ap.add_argument("phase", choices=["record", "build"])
    ap.add_argument("--problem", type=Path, required=True)
    ap.add_argument("--candidate", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default="fp32")
    ap.add_argument("--arch", type=int, default=90)
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    if a.phase == "record":
        record(a.problem.resolve(), a.candidate.resolve(), a.out, a.dtype)
    else:
        build(a.candidate.resolve(), a.out, a.arch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
