"""Device-dependent code in a candidate, read from its syntax tree (issue 25 item 6).

A kernel that asks which device it runs on (`x.is_cuda`, `x.device.type == "cuda"`,
`torch.cuda.is_available()`, `if DEVICE == ...`, the interpreter's `TRITON_INTERPRET` variable) has
a path per device, and a check on one device runs one of them: a CPU run verifies the CPU path
only. The query may sit in an `if` or be passed along (`_config(M, N, x.is_cuda)`); either way the
module's behaviour depends on the device, so every query is reported, with its line.
"""

from __future__ import annotations

import ast

from kiln.tools import pyparse

DEVICE_WORDS = ("cuda", "cpu", "gpu", "hip", "xpu", "mps")


def _is_device_string(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower() in DEVICE_WORDS


def _dotted(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001 - a node ast cannot print is no device query
        return ""


def _query(node: ast.AST) -> bool:
    """Is `node` itself a question about the device?"""
    if isinstance(node, ast.Attribute) and node.attr in ("is_cuda", "is_cpu", "is_mps", "is_xpu"):
        return True
    if isinstance(node, ast.Attribute) and node.attr == "type" and _dotted(node.value).endswith("device"):
        return True  # x.device.type
    if isinstance(node, ast.Call) and _dotted(node.func) in ("torch.cuda.is_available", "torch.cuda.device_count"):
        return True
    if isinstance(node, ast.Constant) and node.value == "TRITON_INTERPRET":
        return True  # os.environ.get("TRITON_INTERPRET"): the interpreter's path vs the compiled one
    if isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        names = [_dotted(s) for s in sides]
        named = any(_is_device_string(s) or isinstance(s, ast.Call) and _dotted(s.func) == "torch.device" for s in sides)
        if named and any("device" in n.lower() for n in names):
            return True  # x.device == "cuda", DEVICE != "cpu"
    return False


def device_queries(src: str) -> list[str]:
    """'line N: `expr`' for every question about the device in the module (outermost only)."""
    try:
        tree = pyparse.parse(src)
    except SyntaxError:
        return []
    found: dict[int, str] = {}
    for node in ast.walk(tree):
        line = getattr(node, "lineno", None)
        if line is not None and _query(node) and line not in found:
            found[line] = _dotted(node)[:80]
    return [f"line {line}: `{text}`" for line, text in sorted(found.items())]


def verified_paths(queries: list[str], device: str) -> str | None:
    """What a run on `device` verified of a kernel with these device queries (None: no queries, one path)."""
    if not queries:
        return None
    if device == "cpu":
        return f"CPU branch only; the CUDA branch never ran (the kernel asks for the device at {queries[0]})"
    return f"{device.upper()} branch only; the CPU branch never ran (the kernel asks for the device at {queries[0]})"
