"""The spatial and attention kernels also compile for the H200 (sm_90) with no GPU, through Triton's
real compiler (the interpreter misses compile-only errors: constexpr branches, loop-carried types,
a tap loop with a run-time start): convs and attention use tensor-core MMAs, fp32 and bf16."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from spatial_lib import EXTRA, LEVEL1  # same directory (pytest puts it on sys.path)

triton = pytest.importorskip("triton")
from triton.backends.compiler import GPUTarget  # noqa: E402

TAPS = {f"{p}{d}": v for p, v in (("S", 1), ("P", 1), ("D", 1), ("K", 3)) for d in "DHW"}
CONSTEXPRS = {  # a representative launch of each kernel (ModelNew picks these from the shapes)
    "conv": TAPS | {"FLAT": False, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "BH": 8, "BW": 16, "PREC": "tf32x3"},
    "convt": TAPS | {"SH": 2, "SW": 2, "PERD": 1, "PERH": 2, "PERW": 2, "BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32,
                     "BH": 8, "BW": 16, "PREC": "tf32x3", "FLAT": False},
    "conv1x1": {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64, "ONE_K": True, "PREC": "tf32x3"},
    "dwconv": TAPS | {"BLOCK": 1024, "BH": 2, "BW": 512},
    "pool": TAPS | {"COUNT_PAD": True, "DIVISOR": 0, "BLOCK": 1024, "BH": 2, "BW": 512},
    "attn_flash": {"CAUSAL": True, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_D": 64, "BLOCK_DV": 64, "PREC": "tf32x3"},
    "attn_scores": {"CAUSAL": True, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "PREC": "tf32x3"},
    "attn_softmax": {"BLOCK": 1024},
    "attn_pv": {"CAUSAL": False, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "PREC": "tf32x3"},
    "cs_partial": {"BLOCK": 2048},
    "cs_finish": {"RUNNING": True, "TRACK": True, "SP": 64},
}  # fmt: skip
FLOATS = {"eps", "momentum", "qk_scale", "scale"}
OWN = {"ws_ptr": "*fp32", "stats_ptr": "*fp32", "nbt_ptr": "*i64", "s_ptr": "*fp32"}  # workspaces, counters
MMA = {"conv", "conv1x1", "convt", "attn_flash", "attn_scores", "attn_pv"}


def _kernels(path: Path) -> dict:
    spec = importlib.util.spec_from_file_location(f"sm90s_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {re.sub(r"^_kiln_(s\d+_)?", "", k): v for k, v in vars(mod).items() if isinstance(v, triton.runtime.jit.JITFunction)}


def _compile(fn, base: str, ptr: str, flat: bool = False, prec: str | None = None) -> str:
    consts = {a: v for a, v in CONSTEXPRS[base].items() if a in fn.arg_names}
    consts |= {"PREC": prec} if prec else {}
    consts |= {"FLAT": flat} if "FLAT" in consts else {}
    if ptr != "*fp32" and "PREC" in consts:
        consts["PREC"] = "tf32"  # what ModelNew passes for 16-bit inputs
    is_ptr = {a: a.endswith("_ptr") or a[:1] == "p" and a[1:].isdigit() for a in fn.arg_names}
    sig = {a: "constexpr" if a in consts else (OWN.get(a, ptr) if is_ptr[a] else ("fp32" if a in FLOATS else "i32"))
           for a in fn.arg_names}  # fmt: skip
    attrs = {(i,): [["tt.divisibility", 16]] for i, a in enumerate(fn.arg_names) if is_ptr[a] and a not in consts}
    src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 3}).asm["ptx"]


PROBLEMS = [
    LEVEL1 / "55_conv_standard_2D__asymmetric_input__square_kernel.py",
    LEVEL1 / "75_conv_transposed_2D_asymmetric_input_asymmetric_kernel_strided__grouped____padded____dilated__.py",
    LEVEL1 / "86_conv_depthwise_separable_2D.py",
    LEVEL1 / "43_Max_Pooling_3D.py",
    LEVEL1 / "33_BatchNorm.py",
    EXTRA / "x_sdpa_wide_head.py",
]


@pytest.mark.slow
def test_spatial_kernels_compile_for_sm90(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gen) -> None:
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    seen = set()
    for prob in PROBLEMS:
        for base, fn in _kernels(gen(prob, tmp_path)).items():
            if base not in CONSTEXPRS:
                continue  # the elementwise normalise after batch statistics: test_builtin_sm90_offline
            variants = [("*fp32", False)] + ([("*bf16", False)] if base in MMA else []) + ([("*fp32", True)] if base == "conv" else [])
            if base == "conv":  # fp32 on a GPU takes three bf16 products (`_kiln_f32_dot`)
                bf = _compile(fn, base, "*fp32", False, prec="bf16x3")
                assert "wgmma" in bf and "bf16" in bf, "conv: bf16x3 is not bf16 tensor-core MMAs"
            for ptr, flat in variants:
                ptx = _compile(fn, base, ptr, flat)
                if base in MMA:
                    assert "wgmma" in ptx or "mma.sync" in ptx, f"{base}: no tensor-core MMA"
            seen.add(base)
    assert seen == set(CONSTEXPRS), set(CONSTEXPRS) - seen
