"""What language a candidate's kernels are written in, and where its CUDA source strings are."""

from __future__ import annotations

import ast
import re

from kiln.tools import pyparse
from kiln.tools.records import Lang

_CUDA_MARKERS = re.compile(
    r"\bload_inline\b|\bCudaKernel\b|kiln\.tools\.cuda|\bRawKernel\b|\bRawModule\b|__global__"
)
_TRITON_MARKERS = re.compile(r"@\s*triton\.(?:jit|autotune|heuristics)\b|from\s+triton\b.*\bjit\b")


def detect_lang(source: str) -> Lang:
    """"cuda" for load_inline / kiln's fast path / raw CUDA; "triton" for @triton.jit; "torch" for a
    ModelNew written in plain PyTorch; "unknown" otherwise. CUDA wins when both appear, since a CUDA
    build is the stricter path."""
    if _CUDA_MARKERS.search(source):
        return "cuda"
    if _TRITON_MARKERS.search(source):
        return "triton"
    if re.search(r"^class\s+ModelNew\b", source, re.M):
        return "torch"
    return "unknown"


def cuda_backend(source: str) -> str:
    """Which CUDA build route a candidate takes: load_inline (torch extension) or the fast path."""
    if "load_inline" in source:
        return "load_inline"
    if "CudaKernel" in source or "kiln.tools.cuda" in source:
        return "nvrtc"
    return "cuda"


# --------------------------------------------------------------------------- source extraction


def _module_strings(tree: ast.Module) -> dict[str, str]:
    """Module-level `NAME = "..."` string constants (how KernelBench candidates hold their source)."""
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for tgt in node.targets:
                if isinstance(tgt, ast.Name):
                    out[tgt.id] = node.value.value
    return out


def _resolve(node: ast.AST | None, names: dict[str, str]) -> list[str]:
    if node is None:
        return []
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name) and node.id in names:
        return [names[node.id]]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [s for elt in node.elts for s in _resolve(elt, names)]
    return []


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def extract_cuda_sources(source: str) -> dict[str, list[str]]:
    """The CUDA/C++ source strings a candidate compiles, found statically (no candidate code runs).

    Returns {"cuda": [...], "cpp": [...], "kernel": [...]}: load_inline's cuda_sources and
    cpp_sources, and the first argument of `CudaKernel(...)` / cupy `RawKernel`/`RawModule`.
    Sources built at run time (f-strings with values, string concatenation) are not found.
    """
    tree = pyparse.parse(source)
    names = _module_strings(tree)
    found: dict[str, list[str]] = {"cuda": [], "cpp": [], "kernel": []}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _call_name(node)
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        if name == "load_inline":
            found["cuda"] += _resolve(kw.get("cuda_sources"), names)
            found["cpp"] += _resolve(kw.get("cpp_sources", node.args[1] if len(node.args) > 1 else None), names)
        elif name in ("CudaKernel", "RawKernel", "RawModule"):
            first = node.args[0] if node.args else kw.get("source") or kw.get("code")
            found["kernel"] += _resolve(first, names)
    return found
