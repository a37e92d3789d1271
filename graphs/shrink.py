"""`--shrink`: run a problem sized for a GPU at sizes Triton's interpreter can check on a CPU.

A KernelBench problem's sizes are module-level integer constants (`batch_size = 16`, `dim1 = 256`,
`input_shape = (32768,)`) read by `get_inputs()` / `get_init_inputs()`. The largest of them is halved
(never below MIN_SIZE, or LAST_MIN_SIZE where that is not enough; smaller ones, often a kernel size,
stride or dim index, are left alone) until the inputs and outputs together hold at most the element
count the check's budget allows. The
problem file itself is never changed: the run checks a copy in its run directory, and records the
original sizes, the shrunk ones and both element counts (`ShrinkRecord`, in run.json and summary.json).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from kiln.tools.errors import KilnInputError
from kiln.tools.records import JSON_SAFE

MIN_SIZE = 16
LAST_MIN_SIZE = 4  # only where halving to MIN_SIZE is not enough (`fit`)
SIZE_FUNCTIONS = ("get_inputs", "get_init_inputs")


class ShrinkRecord(BaseModel):
    """What `--shrink` changed, so a reader knows the kernel was checked at other sizes."""

    model_config = JSON_SAFE

    original_problem: str = Field(description="the problem file as given (never modified)")
    constants: dict[str, list[Any]] = Field(description="NAME -> [original value, shrunk value]")
    input_numel_before: int
    input_numel_after: int
    output_numel_before: int
    output_numel_after: int
    estimate_s_before: float = Field(description="interpreter estimate per check, original sizes")
    estimate_s_after: float

    def line(self) -> str:
        changed = ", ".join(f"{k} {v[0]} -> {v[1]}" for k, v in self.constants.items())
        return (f"--shrink: {changed} (input {self.input_numel_before:,} -> {self.input_numel_after:,} elements; "
                f"about {self.estimate_s_before:,.0f} s -> {self.estimate_s_after:,.0f} s per check); "
                f"speed and correctness are for these sizes")


def _size_names(tree: ast.Module) -> set[str]:
    """Names read inside get_inputs() and get_init_inputs()."""
    names: set[str] = set()
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef) and fn.name in SIZE_FUNCTIONS:
            names |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return names


class Size(BaseModel):
    """One size in the problem's source: an int literal, or an int expression of literals
    (`N = 2048 * 2`, KernelBench's newer files), and where it is written (one line)."""

    value: int
    line: int
    col: int
    end_col: int


_INT_OPS = {ast.Mult: lambda a, b: a * b, ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
            ast.FloorDiv: lambda a, b: a // b if b else None, ast.LShift: lambda a, b: a << b if 0 <= b <= 62 else None,
            ast.Pow: lambda a, b: a ** b if 0 <= b <= 62 and abs(a) <= 1 << 16 else None}


def int_value(node: ast.expr) -> int | None:
    """The value of an int literal or of an arithmetic expression of int literals; None otherwise."""
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int else None
    if isinstance(node, ast.BinOp) and type(node.op) in _INT_OPS:
        a, b = int_value(node.left), int_value(node.right)
        value = None if a is None or b is None else _INT_OPS[type(node.op)](a, b)
        return value if value is not None and abs(value) < 1 << 62 else None
    return None


def size_constants(source: str) -> dict[str, list[Size]]:
    """Module-level `NAME = int` or `NAME = (int, ...)` that the size functions read (an int may be an
    expression of int literals, on one line; `A = B = int` is one size named "A = B", `A, B = int, int`
    two): their values and where they are written."""
    tree = ast.parse(source)
    used, out = _size_names(tree), {}
    for node in tree.body:
        for names, value in _assigned(node):
            items = value.elts if isinstance(value, ast.Tuple) else [value]
            sizes = [Size(value=v, line=e.lineno, col=e.col_offset, end_col=e.end_col_offset or e.col_offset)
                     for e in items if (v := int_value(e)) is not None and e.end_lineno == e.lineno]
            if set(names) & used and items and len(sizes) == len(items):
                out[" = ".join(names)] = sizes
    return out


def _assigned(node: ast.stmt) -> list[tuple[list[str], ast.expr]]:
    """(names, value) pairs a module-level assignment binds: `A = v`, `A = B = v` (both names, one
    value) and `A, B = v1, v2` (each name its own)."""
    if not isinstance(node, ast.Assign):
        return []
    if all(isinstance(t, ast.Name) for t in node.targets):
        return [([t.id for t in node.targets if isinstance(t, ast.Name)], node.value)]
    target, value = node.targets[0], node.value
    if len(node.targets) == 1 and isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) \
            and len(target.elts) == len(value.elts) and all(isinstance(t, ast.Name) for t in target.elts):
        return [([t.id], v) for t, v in zip(target.elts, value.elts, strict=True) if isinstance(t, ast.Name)]
    return []


def _rewrite(source: str, new: dict[tuple[int, int, int], int]) -> str:
    """The source with the sizes at (line, column, end column) written as the given int literals;
    everything else as written."""
    lines = source.splitlines(keepends=True)
    for (line, col, end), value in sorted(new.items(), reverse=True):
        text = lines[line - 1]
        lines[line - 1] = text[:col] + str(value) + text[end:]
    return "".join(lines)


def sizes_of(source: str, path: Path) -> tuple[int, int]:
    """(input elements, output elements) of a problem source, run on PyTorch's meta device (shapes
    only) when its ops allow, else for real on the CPU. The problem is the user's own file."""
    import torch

    def numel(x: Any) -> int:
        if isinstance(x, torch.Tensor):
            return x.numel()
        return sum(numel(v) for v in x) if isinstance(x, list | tuple) else 0

    def call(what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as err:  # noqa: BLE001 - the user's code may raise anything: one line
            raise KilnInputError(f"{path}: {what} raised {type(err).__name__}: {err}") from None

    def run() -> tuple[int, int]:
        scope: dict[str, Any] = {"__name__": "kiln_problem_sizes", "__file__": str(path)}
        call("the problem module", exec, compile(source, str(path), "exec"), scope)
        inputs = call("get_inputs()", scope["get_inputs"])
        with torch.no_grad():
            model = call("Model(*get_init_inputs())", lambda: scope["Model"](*scope["get_init_inputs"]()))
            out = call("Model.forward", model, *inputs)
        return numel(inputs), numel(out)

    try:
        with torch.device("meta"):
            return run()
    except KilnInputError:  # an op with no meta kernel, or the problem's own error: the real thing says which
        return run()


def fit(source: str, path: Path, max_numel: int) -> tuple[str, dict[str, list[Any]], tuple[int, int]]:
    """Halve the largest size constant until inputs + outputs hold at most `max_numel` elements, or
    nothing is left to halve. Returns the new source, NAME -> [old, new], and the new sizes.

    Sizes go down to MIN_SIZE first; only if that is not enough, every size of at least
    2 x LAST_MIN_SIZE goes on down to LAST_MIN_SIZE (a 5-D conv of batch, channels and three extents
    of 16 still holds a million elements). A halving the problem's own code rejects (a kernel larger
    than its input, a LayerNorm shape that no longer matches, two sizes of one tensor pair that must
    agree) is undone; the sizes equal to it are then halved together (`batch_size = 32768` with
    `input_shape = (32768,)`), and a size that no halving keeps valid is left as it is."""
    consts = size_constants(source)
    sizes = {(c.line, c.col, c.end_col): c.value for items in consts.values() for c in items}
    current = sizes_of(source, path)
    for floor in (MIN_SIZE, LAST_MIN_SIZE):
        sizes, current = _halve(source, path, max_numel, sizes, current, floor)
    changed = {name: [_literal(items), _shrunk(items, sizes)] for name, items in consts.items()
               if _literal(items) != _shrunk(items, sizes)}
    return _rewrite(source, sizes), changed, current


def _halve(source: str, path: Path, max_numel: int, sizes: dict[tuple[int, int, int], int], current: tuple[int, int],
           floor: int) -> tuple[dict[tuple[int, int, int], int], tuple[int, int]]:
    """`fit`'s loop for one floor: the sizes and the element counts it ends with."""
    fixed: set[tuple[int, int, int]] = set()
    while sum(current) > max_numel:
        big = [k for k, v in sizes.items() if v >= 2 * floor and k not in fixed]
        if not big:
            break
        largest = max(big, key=lambda k: sizes[k])
        equal = [k for k in big if sizes[k] == sizes[largest]]
        for keys in [[largest]] + ([equal] if len(equal) > 1 else []):
            trial = {**sizes, **{k: sizes[k] // 2 for k in keys}}
            try:
                current = sizes_of(_rewrite(source, trial), path)
            except KilnInputError:
                continue
            sizes = trial
            break
        else:
            fixed.add(largest)
    return sizes, current


def _literal(items: list[Size]) -> Any:
    return items[0].value if len(items) == 1 else [c.value for c in items]


def _shrunk(items: list[Size], sizes: dict[tuple[int, int, int], int]) -> Any:
    vals = [sizes[(c.line, c.col, c.end_col)] for c in items]
    return vals[0] if len(items) == 1 else vals
