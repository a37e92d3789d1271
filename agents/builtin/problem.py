"""Load a KernelBench-format problem from its source and trace its Model with torch.fx.

The built-in Coder only reads the problem the user handed to kiln; it builds the Model on the
`meta` device for shapes, so nothing big is allocated and no reference compute runs.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch.fx.passes.shape_prop import ShapeProp

from kiln.tools import pyparse


class Unsupported(Exception):
    """The built-in coder does not cover this problem; the message says what."""


class BrokenProblem(Exception):
    """The problem's own code raised (get_inputs, get_init_inputs, Model's constructor): bad input,
    not a gap in the templates. The message names the call and the error."""


def _call(what: str, fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as err:  # noqa: BLE001 - the user's code may raise anything
        raise BrokenProblem(f"{what} raised {type(err).__name__}: {err}") from None


@dataclass
class Problem:
    """What the templates need from a problem: its traced graph and the Model's source pieces."""

    namespace: dict[str, Any]
    gm: torch.fx.GraphModule
    init_src: str = ""
    init_args: str = ""
    forward_args: list[str] = field(default_factory=list)
    input_shapes: list[tuple[int, ...]] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    consts: dict[str, float] = field(default_factory=dict)  # fx's one-element tensor constants (`torch.tensor(c)`)
    scalars: tuple[str, ...] = ()  # forward arguments that get_inputs() gives as Python numbers
    integers: tuple[str, ...] = ()  # forward arguments that get_inputs() gives as integer tensors


def load_problem_src(src: str) -> dict[str, Any]:
    """Execute the problem module's source in a fresh namespace (it is the user's own file)."""
    ns: dict[str, Any] = {"__name__": "kiln_builtin_problem"}
    try:
        exec(compile(src, "<problem>", "exec"), ns)  # noqa: S102 - the user's problem file
    except Exception as err:  # noqa: BLE001 - any failure is a broken problem, reported in one line
        raise Unsupported(f"the problem source does not run: {type(err).__name__}: {err}") from err
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if name not in ns:
            raise Unsupported(f"the problem defines no `{name}`")
    return ns


def _model_def(src: str) -> ast.ClassDef:
    for node in pyparse.parse(src).body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            return node
    raise Unsupported("the problem defines no `class Model`")


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef:
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise Unsupported(f"Model has no `{name}` method")


def init_source(src: str) -> tuple[str, str]:
    """(signature args text, body text) of Model.__init__, with `super(Model, self)` made `super()`.
    ModelNew runs the same body, so it owns the same parameters, created in the same order."""
    cls = _model_def(src)
    plain = all(ast.unparse(b) in ("nn.Module", "torch.nn.Module", "Module") for b in cls.bases)
    if plain and not any(isinstance(n, ast.FunctionDef) and n.name == "__init__" for n in cls.body):
        return "self", "super().__init__()"  # nn.Module's own: no parameters, no arguments
    fn = _method(cls, "__init__")
    args = ast.unparse(fn.args)
    lines = src.splitlines()
    body = "\n".join(lines[fn.body[0].lineno - 1 : fn.end_lineno])
    if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant):
        body = "\n".join(lines[fn.body[1].lineno - 1 : fn.end_lineno]) if len(fn.body) > 1 else ""
    body = textwrap.dedent(body).replace("super(Model, self)", "super()")
    return args, body or "super().__init__()"


def forward_args(src: str) -> list[str]:
    fn = _method(_model_def(src), "forward")
    if fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs:
        raise Unsupported("forward with *args/**kwargs/keyword-only arguments")
    return [a.arg for a in fn.args.args[1:]]


def meta_inputs(ns: dict[str, Any]) -> list[Any]:
    """get_inputs() drawn on the `meta` device (shapes and dtypes only: KernelBench's level-1
    inputs are multi-GB, seconds each to draw on the CPU), or on the CPU if that fails."""
    try:
        with torch.device("meta"):
            return list(ns["get_inputs"]())
    except Exception:  # noqa: BLE001 - numpy interop and the like: draw them for real
        return list(_call("get_inputs()", ns["get_inputs"]))


def _tensor_inputs(ns: dict[str, Any]) -> list[Any]:
    inputs = meta_inputs(ns)
    for i, t in enumerate(inputs):
        if isinstance(t, int | float) and not isinstance(t, bool):  # a scalar operand (matrix x scalar)
            continue
        if not isinstance(t, torch.Tensor):
            raise Unsupported(f"forward input {i} is a {type(t).__name__}, not a tensor or a number")
        if t.is_complex():  # integers are let through: lower_crossent.check_integer_inputs says where they may go
            raise Unsupported(f"forward input {i} has dtype {t.dtype} (only floating, integer and bool inputs)")
    return inputs


def _meta_model(ns: dict[str, Any]) -> Any:
    """Model(*get_init_inputs()) with its parameters on `meta` (a GEMM's 8192 x 8192 weight takes
    seconds to initialise on a CPU, and only shapes are needed); on the CPU if that fails."""
    try:
        with torch.device("meta"):
            return ns["Model"](*ns["get_init_inputs"]())
    except Exception:  # noqa: BLE001 - data-dependent __init__ code: build it for real
        return _call("Model(*get_init_inputs())", lambda: ns["Model"](*ns["get_init_inputs"]()))


def trace(src: str, override: dict[str, Any] | None = None) -> Problem:
    """Build Model(*get_init_inputs()), fx-trace it, and propagate shapes on `meta` tensors.
    `override` sets model attributes before tracing (to see what an attribute controls)."""
    ns = load_problem_src(src)
    torch.manual_seed(0)
    model = _meta_model(ns)
    for name, value in (override or {}).items():
        setattr(model, name, value)
    try:
        gm = torch.fx.symbolic_trace(model)
    except Exception as err:  # noqa: BLE001 - fx raises many types for data-dependent code
        raise Unsupported(f"Model.forward is not traceable by torch.fx ({type(err).__name__}: {err})") from err
    inputs = _tensor_inputs(ns)
    consts = {k: float(v) for k, v in gm.named_buffers() if k.startswith("_tensor_constant") and v.numel() == 1}
    meta_inputs = [torch.empty(t.shape, dtype=t.dtype, device="meta") if isinstance(t, torch.Tensor) else t
                   for t in inputs]
    gm = gm.to("meta")
    try:
        ShapeProp(gm).propagate(*meta_inputs)
    except Exception as err:  # noqa: BLE001 - ops without meta kernels
        raise Unsupported(f"shape propagation failed ({type(err).__name__}: {err})") from err
    args, body = init_source(src)
    attrs = {k: v for k, v in vars(model).items() if not k.startswith("_") and isinstance(v, int | float)}
    fargs = forward_args(src)
    scalars = tuple(a for a, t in zip(fargs, inputs, strict=False) if not isinstance(t, torch.Tensor))
    integers = tuple(a for a, t in zip(fargs, inputs, strict=False) if _is_integer(t))  # lower.py checks their uses
    shapes = [tuple(t.shape) if isinstance(t, torch.Tensor) else () for t in inputs]
    return Problem(ns, gm, body, args, fargs, shapes, attrs, consts, scalars, integers)


def _is_integer(t: Any) -> bool:
    """An integer tensor: only a cross-entropy target may read it (bool masks load as 0.0 / 1.0)."""
    return isinstance(t, torch.Tensor) and not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool)
