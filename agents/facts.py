"""What a candidate kernel seems to assume, read from its syntax tree, for the Proposer to attack.

Regexes got this wrong on real kernels: `BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32` read as BLOCK_K = 64,
a mask with nested parentheses read as missing, thresholds not named BLOCK* missed. The AST sees
tuple assignments, keyword arguments of launches, comparisons against constants and every
`tl.load` / `tl.store` call with its arguments, whatever their layout. CUDA sources live in Python
strings, so the few CUDA facts are still read from the string's text.
"""

from __future__ import annotations

import ast
import re

from kiln.agents.devicepath import device_queries
from kiln.tools import pyparse

SIZE_WORDS = ("BLOCK", "TILE", "CHUNK", "MAX", "MIN", "SIZE", "THRESH", "LIMIT", "SPLIT", "WARP", "GROUP", "NUM")


NOT_SIZES = ("WARP", "STAGE")
"""Launch parameters (num_warps, num_stages): no input size reaches their boundary."""


def _constant_hint(name: str, v: int, names: dict[str, set[int]]) -> str | None:
    """The sizes that reach a constant's boundaries, in the constant's own unit."""
    if any(w in name for w in NOT_SIZES):
        return None
    if "GROUP" in name:  # a count of tiles (grouped tile order), not of rows: its boundary is v tiles
        block = f"BLOCK{name.split('GROUP', 1)[1]}"
        tiles = sorted(names.get(block, set()))
        at = ", ".join(str(v * b + 1) for b in tiles) if tiles else f"{v} x {block} + 1"
        return f"{name} = {v} groups {v} tiles of {block} rows: try {at} rows (one row past {v} tiles)"
    return f"{name} = {v}: try sizes {v}, {v + 1}, {2 * v - 1}"


def _int(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    return None


def _is_size_name(name: str) -> bool:
    return name.isupper() and any(w in name for w in SIZE_WORDS)


def _pairs(target: ast.AST, value: ast.AST) -> list[tuple[str, ast.AST]]:
    """(name, value) of an assignment, tuple unpacking included: `A, B = 64, 32`."""
    if isinstance(target, ast.Name):
        return [(target.id, value)]
    if isinstance(target, ast.Tuple | ast.List) and isinstance(value, ast.Tuple | ast.List) \
            and len(target.elts) == len(value.elts):
        return [p for t, v in zip(target.elts, value.elts, strict=True) for p in _pairs(t, v)]
    return []


def constants(tree: ast.AST) -> dict[str, set[int]]:
    """Every integer given to an upper-case size-like name: assignments, defaults, launch keywords."""
    found: dict[str, set[int]] = {}

    def note(name: str, node: ast.AST | None) -> None:
        value = _int(node)
        if value is not None and _is_size_name(name):
            found.setdefault(name, set()).add(value)

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for name, value in _pairs(target, node.value):
                    note(name, value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            note(node.target.id, node.value)
        elif isinstance(node, ast.keyword) and node.arg:
            note(node.arg, node.value)
        elif isinstance(node, ast.arguments):
            named = node.args[len(node.args) - len(node.defaults):] + node.kwonlyargs
            defaults = list(node.defaults) + list(node.kw_defaults)
            for arg, default in zip(named, defaults, strict=False):
                note(arg.arg, default)
    return found


def _is_rank(node: ast.AST) -> bool:
    """`x.dim()`, `x.ndim`, `x.ndimension()`, `len(x.shape)`: a number of dimensions, not a size."""
    if isinstance(node, ast.Attribute) and node.attr == "ndim":
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("dim", "ndimension"):
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" and \
        bool(node.args) and isinstance(node.args[0], ast.Attribute) and node.args[0].attr == "shape"


def program_id_names(tree: ast.AST) -> set[str]:
    """Names assigned from `tl.program_id(...)` (`pid = tl.program_id(0)`)."""
    return {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
            and _is_tl(n.value, "program_id") for t in n.targets if isinstance(t, ast.Name)}


def _branch_hint(node: ast.Compare, var: ast.AST, values: set[int], pids: set[str]) -> list[str]:
    text = ast.unparse(node)
    if _is_rank(var):
        return [f"a branch on `{text}` (a rank, not a size): try inputs with {v} and with {v + 1} dimensions"
                for v in sorted(values)]
    if isinstance(var, ast.Name) and var.id in pids or isinstance(var, ast.Call) and _is_tl(var, "program_id"):
        return [f"a path for some programs only (`{text}`): try sizes that launch one program and several"]
    if values & {1} and isinstance(node.ops[0], ast.Eq | ast.NotEq | ast.LtE | ast.Gt):
        return [f"a branch on `{text}`: try that dimension at 1 and at 2 (each side of the split)"]
    return [f"a branch on `{text}`: try sizes {v} and {v + 1}" for v in sorted(values) if v > 1]


def thresholds(tree: ast.AST, names: dict[str, set[int]]) -> list[str]:
    """Comparisons against a constant, each with the inputs that reach both sides: sizes (`if n <=
    FUSED_MAX_N`, `if K > 4096`), a split on a dimension of 1 (`if inner == 1`), ranks (`if x.dim()
    == 2`), and paths of some programs only (`if pid == 0` in a kernel)."""
    out = []
    pids = program_id_names(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare) or len(node.comparators) != 1:
            continue
        left, right = node.left, node.comparators[0]
        for var, bound in ((left, right), (right, left)):
            values = names.get(bound.id, set()) if isinstance(bound, ast.Name) \
                else {v for v in (_int(bound),) if v is not None}
            if values and isinstance(var, ast.Name | ast.Attribute | ast.Subscript | ast.Call):
                out += _branch_hint(node, var, values, pids)
    return sorted(set(out))


def _is_tl(call: ast.Call, name: str) -> bool:
    f = call.func
    return isinstance(f, ast.Attribute) and f.attr == name and isinstance(f.value, ast.Name) and f.value.id == "tl"


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _has_arange(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and _is_tl(n, "arange") for n in ast.walk(node))


def vector_names(fn: ast.AST) -> set[str]:
    """Names in a function that hold a block of offsets: built from tl.arange, directly or not."""
    assigns = [(t.id, n.value) for n in ast.walk(fn) if isinstance(n, ast.Assign)
               for t in n.targets if isinstance(t, ast.Name)]
    vec: set[str] = set()
    while True:
        more = {name for name, value in assigns if name not in vec and (_has_arange(value) or _names(value) & vec)}
        if not more:
            return vec
        vec |= more


def unmasked(tree: ast.AST) -> tuple[int, int, list[int]]:
    """(tl.load/tl.store calls, how many read or write a block of offsets with no mask, their lines).
    A scalar access (one value per program, no tl.arange behind its offset) needs no mask."""
    total, lines = 0, []
    fns: list[ast.AST] = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    for fn in fns or [tree]:
        vec = vector_names(fn)
        for node in ast.walk(fn):
            for name, mask_pos in (("load", 1), ("store", 2)):
                if not (isinstance(node, ast.Call) and _is_tl(node, name) and node.args):
                    continue
                total += 1
                has_mask = any(k.arg == "mask" for k in node.keywords) or len(node.args) > mask_pos
                pointer = node.args[0]
                if not has_mask and (_has_arange(pointer) or _names(pointer) & vec):
                    lines.append(node.lineno)
    return total, len(lines), sorted(set(lines))


def _attr_calls(tree: ast.AST) -> set[str]:
    return {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}


def _cuda_facts(src: str) -> list[str]:
    facts = [f"a fixed shared-memory array of {n} elements: try dimensions just past it"
             for n in sorted(set(re.findall(r"__shared__\s+\w+\s+\w+\[(\d+)\]", src)))]
    if re.search(r"\bint\s+(idx|i|tid|index)\s*=\s*blockIdx", src):
        facts.append("32-bit indices: very large tensors may overflow them")
    return facts


def candidate_facts(src: str, limit: int = 12) -> list[str]:
    """Plain statements of what a kernel seems to assume, for the Proposer to attack."""
    try:
        tree = pyparse.parse(src)
    except SyntaxError as err:
        return [f"the source does not parse (line {err.lineno}); read it yourself"]
    names = constants(tree)
    hints = [_constant_hint(name, v, names) for name in sorted(names) for v in sorted(names[name]) if v > 1]
    facts = [f for f in hints if f]
    facts += thresholds(tree, names)
    calls = _attr_calls(tree)
    if "next_power_of_2" in calls:
        facts.append("a block size is the next power of two of a dimension: try 2^k and 2^k + 1")
    total, n_bare, lines = unmasked(tree)
    if n_bare:
        where = ", ".join(str(n) for n in lines[:5])
        facts.append(f"{n_bare} of {total} tl.load/tl.store calls have no mask (line {where}): sizes off the "
                     "block grid may read or write past the end")
    facts += _cuda_facts(src)
    facts += [f"it asks which device it runs on ({q}): a check runs only the branch of its own device, so aim "
              "at that branch" for q in device_queries(src)[:2]]
    if not {"contiguous", "stride"} & calls:
        facts.append("no .contiguous() and no strides: transposed or sliced inputs may be read wrongly")
    facts += [f"asserts: {ast.unparse(n.test)}" for n in ast.walk(tree) if isinstance(n, ast.Assert)][:3]
    return facts[:limit]
