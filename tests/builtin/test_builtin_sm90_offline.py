"""Every generated kernel also compiles for the H200 (sm_90) with no GPU: Triton's real compiler
path (the interpreter misses compile-only errors), with vectorized 16-byte loads where the data
is contiguous and tensor-core MMAs in the matmul."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")
from triton.backends.compiler import GPUTarget  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PROBLEMS = Path(__file__).resolve().parent / "problems"
CONSTEXPRS = {
    "_kiln_row_onepass": {"BLOCK_R": 1024, "ROWS": 2, "BLOCK_N": 64},
    "_kiln_row_looped": {"BLOCK_R": 1024, "ROWS": 1, "BLOCK_N": 64},
    "_kiln_row_split": {"BLOCK_R": 32, "ROWS": 1, "BLOCK_N": 128},
    "_kiln_row_finish": {"SP": 64, "ROWS": 1, "BLOCK_N": 128},
    "_kiln_lvl_split": {"BLOCK_R": 1024, "ROWS": 1, "BLOCK_N": 64},
    "_kiln_lvl_finish": {"SP": 64, "ROWS": 1, "BLOCK_N": 128},
    "_kiln_lvl_out": {"BLOCK_R": 1024, "ROWS": 1, "BLOCK_N": 64},
    "_kiln_ew_flat": {"BLOCK": 2048},
    "_kiln_ew_bcast": {"RB": 2, "CB": 1024},
    "_kiln_mm": {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "SPLIT_K": 1, "PREC": "tf32x3",
                 "EVEN_K": True},
    "_kiln_gemv": {"BLOCK_M": 8, "BLOCK_K": 512},
    "_kiln_mm_reduce": {"BLOCK_M": 64, "BLOCK_N": 64, "SPLIT_K": 8},
}
ALIGNED = ("out_ptr", "a_ptr", "b_ptr", "n", "R", "N", "S3", "sam", "sbn", "K", "KS", "s_row")  # sizes like 4096


def _kernels(path: Path) -> dict:
    spec = importlib.util.spec_from_file_location(f"sm90_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {k: v for k, v in vars(mod).items() if isinstance(v, triton.runtime.jit.JITFunction)}


def _compile(fn, name: str, ptr: str = "*fp32", **over) -> str:
    base = name.removesuffix("_r").removesuffix("_c")  # per-layout variants of the row kernels
    base = re.sub(r"^_kiln_lvl\d+_", "_kiln_lvl_", base)  # one split/finish pair per reduction level
    consts = {a: v for a, v in (CONSTEXPRS[base] | over).items() if a in fn.arg_names}
    if ptr != "*fp32" and "PREC" in consts:
        consts["PREC"] = "tf32"  # what ModelNew passes for 16-bit inputs
    is_ptr = {a: a.endswith("_ptr") or a[:1] == "p" and a[1:].isdigit() for a in fn.arg_names}
    own = {"ws_ptr": "*fp64", "vals_ptr": "*fp32"}  # workspaces: fp64 partial sums, fp32 reduced values
    sig = {a: "constexpr" if a in consts else (own.get(a, ptr) if is_ptr[a] else "i32")
           for a in fn.arg_names}  # fmt: skip
    attrs = {(i,): [["tt.divisibility", 16]] for i, a in enumerate(fn.arg_names)
             if a in ALIGNED or is_ptr[a] and a not in consts}  # fmt: skip
    src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8, "num_stages": 3}).asm["ptx"]


@pytest.mark.parametrize("name", ["softmax", "layernorm", "elementwise_chain", "sum_reduction", "linear_gelu", "split_full"])
def test_kernels_compile_for_sm90(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gen) -> None:
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    path = EXAMPLES / f"{name}.py"
    kernels = _kernels(gen(path if path.exists() else PROBLEMS / f"{name}.py", tmp_path))
    assert kernels
    if name == "split_full":
        assert {"_kiln_row_split", "_kiln_row_finish"} <= set(kernels)
    if name in ("softmax", "layernorm"):
        assert {"_kiln_lvl1_split", "_kiln_lvl2_finish", "_kiln_lvl_out"} <= set(kernels)
    for kname, fn in kernels.items():
        ptx = _compile(fn, kname)
        if kname in ("_kiln_row_onepass", "_kiln_ew_flat", "_kiln_gemv") and name != "sum_reduction":
            # vector loads, with or without a cache hint (ld.global.L1::evict_first.L2::cache_hint.v4.b32)
            assert re.search(r"ld\.global(\.[\w:]+)*\.v4", ptx), f"{name}.{kname}: loads are not vectorized"
        if kname == "_kiln_mm":
            assert "wgmma" in ptx or "mma.sync" in ptx, "the matmul does not use tensor cores"
            split = _compile(fn, kname, SPLIT_K=8)  # the split-K slice: partial sums, no epilogue
            assert "wgmma" in split or "mma.sync" in split
            bf = _compile(fn, kname, PREC="bf16x3")  # fp32 on a GPU: three bf16 products (`_kiln_f32_dot`)
            assert ("wgmma" in bf or "mma.sync" in bf) and "bf16" in bf


@pytest.mark.parametrize("name", ["softmax", "linear_gelu"])
def test_kernels_compile_for_bf16(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gen) -> None:
    """bf16 problems (kiln check --dtype bf16) use the same source: fp32 math, bf16 loads/stores."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    for kname, fn in _kernels(gen(EXAMPLES / f"{name}.py", tmp_path)).items():
        ptx = _compile(fn, kname, ptr="*bf16")
        assert "bf16" in ptx or "b16" in ptx


def test_the_default_fp32_gemm_tile_does_not_spill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gen) -> None:
    """The fp32 default tile (tf32x3: three products, hi and lo halves of both operands in registers)
    compiled for sm_90 keeps every value in registers: the earlier 128x128x64 tile held 255 registers
    and spilled ~880 bytes a thread (cuobjdump's STACK), which the GEMM main loop pays every step."""
    import os
    import subprocess

    from kiln.agents.builtin import space

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    fn = _kernels(gen(EXAMPLES / "linear_gelu.py", tmp_path))["_kiln_mm"]
    bm, bn, bk, nw, ns = space.MM_TILES[space.DEFAULTS["matmul"]["tile"]]
    consts = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "SPLIT_K": 1, "PREC": "tf32x3"}
    is_ptr = {a: a.endswith("_ptr") or a[:1] == "p" and a[1:].isdigit() for a in fn.arg_names}
    sig = {a: "constexpr" if a in consts else ("*fp32" if is_ptr[a] else "i32") for a in fn.arg_names}
    attrs = {(i,): [["tt.divisibility", 16]] for i, a in enumerate(fn.arg_names) if is_ptr[a] or a in ALIGNED}
    src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs)
    kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": nw, "num_stages": ns})
    cubin = tmp_path / "mm.cubin"
    cubin.write_bytes(kernel.asm["cubin"])
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not os.access(tool, os.X_OK):
        pytest.skip("Triton ships no cuobjdump here")
    usage = subprocess.run([str(tool), "--dump-resource-usage", str(cubin)], capture_output=True, text=True).stdout
    found = re.search(r"REG:(\d+) STACK:(\d+)", usage)
    assert found, usage
    assert int(found.group(2)) == 0, f"the default tile {(bm, bn, bk, nw, ns)} spills: {found.group(0)}"
