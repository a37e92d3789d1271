"""Op signatures: how a captured call's function and arguments are named, written back as Python,
and matched again at patch time. Pure functions of torch objects; no capture state here.

A function is named the way a problem file writes it: `F.<name>` when `torch.nn.functional` has it,
`torch.<name>` when `torch` has it, `.<name>` for a Tensor method (`x.softmax(-1)`), `op:<name>` for
a Python operator on tensors (`x * y`). Anything else cannot be written back and is not extracted.
"""

from __future__ import annotations

import inspect
import math
import operator
from typing import Any

import torch
import torch.nn.functional as F

from kiln.evals.model.records import ArgSpec, TensorSig

HEAD_MARK = "@head"
"""In a fused pair's tail signature: the argument that is the head's output."""

OPERATORS = {"__add__": "+", "__radd__": "+", "__sub__": "-", "__mul__": "*", "__rmul__": "*",
             "__truediv__": "/", "__matmul__": "@", "__neg__": "-"}


class NotWritable(Exception):
    """A value or function that a problem file cannot reproduce; the message says what."""


_POSITIONAL: dict[Any, tuple[str, ...] | None] = {}
_UNREAD: Any = object()


def positional_names(func: Any) -> tuple[str, ...] | None:
    """The names a Python function's arguments may be given positionally (None for builtins); read
    once, outside torch.compile, so tracing never mutates this table."""
    if func not in _POSITIONAL:
        try:
            params = inspect.signature(func).parameters.values()
            kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            _POSITIONAL[func] = tuple(p.name for p in params if p.kind in kinds)
        except (TypeError, ValueError):
            _POSITIONAL[func] = None
    return _POSITIONAL[func]


def normalize(func: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """One form for every way of writing a call: keyword arguments that could be positional become
    positional (`F.group_norm(x, 32, weight=w)` is `F.group_norm(x, 32, w)`; torch.compile passes them
    positionally). Builtins without a Python signature stay as written."""
    if not kwargs:
        return args, kwargs
    names = _POSITIONAL.get(func, _UNREAD)  # read already: no need to ask torch.compiler
    if names is _UNREAD:
        names = None if torch.compiler.is_compiling() else positional_names(func)
    if not names:
        return args, kwargs
    out, kw = list(args), dict(kwargs)
    for name in names[len(args):]:
        if name not in kw:
            break
        out.append(kw.pop(name))
    return tuple(out), kw


def func_name(func: Any) -> str:
    """'F.silu', 'torch.softmax', '.softmax', 'op:__mul__', or '?<qualname>'."""
    name = getattr(func, "__name__", "")
    owner = getattr(func, "__qualname__", "").split(".")[0]
    if owner in ("TensorBase", "Tensor", "_TensorBase"):
        return f"op:{name}" if name in OPERATORS else f".{name}"
    if name and getattr(F, name, None) is func:
        return f"F.{name}"
    if name and getattr(torch, name, None) is func:
        return f"torch.{name}"
    return f"?{getattr(func, '__module__', '')}.{getattr(func, '__qualname__', repr(func))}"


def resolve(name: str) -> Any:
    """The function a name stands for (the inverse of func_name)."""
    if name.startswith("F."):
        return getattr(F, name[2:])
    if name.startswith("torch."):
        return getattr(torch, name[6:])
    if name.startswith("."):
        return getattr(torch.Tensor, name[1:])
    if name.startswith("op:"):
        return getattr(torch.Tensor, name[3:])
    raise NotWritable(f"function {name[1:]} cannot be named in a problem file")


def dtype_name(dt: torch.dtype) -> str:
    return str(dt).replace("torch.", "")


def tensor_sig(t: torch.Tensor) -> TensorSig:
    return TensorSig(shape=list(t.shape), dtype=dtype_name(t.dtype), stride=list(t.stride()), device=t.device.type)


def value_src(v: Any) -> str:
    """Python source for a plain argument value; raises NotWritable for anything else."""
    if v is None or isinstance(v, bool | int | str):
        return repr(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return f"float({str(v)!r})"
        return repr(v)
    if isinstance(v, torch.dtype):
        return f"torch.{dtype_name(v)}"
    if isinstance(v, torch.Size | tuple | list):
        inner = ", ".join(value_src(x) for x in v)
        if isinstance(v, list):
            return f"[{inner}]"
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, torch.memory_format):
        return str(v)
    raise NotWritable(f"an argument of type {type(v).__name__}")


def arg_spec(v: Any, name: str, params: dict[int, str]) -> ArgSpec:
    if isinstance(v, torch.Tensor):
        if id(v) in params:
            return ArgSpec(kind="param", name=name, tensor=tensor_sig(v), param=params[id(v)])
        return ArgSpec(kind="tensor", name=name, tensor=tensor_sig(v))
    return ArgSpec(kind="value", name=name, src=value_src(v))


def call_args(args: tuple, kwargs: dict, params: dict[int, str]) -> list[ArgSpec]:
    out = [arg_spec(a, "", params) for a in args]
    return out + [arg_spec(v, k, params) for k, v in sorted(kwargs.items())]


def render_call(name: str, args: list[str], kwargs: list[tuple[str, str]]) -> str:
    """Python source of a call, e.g. `F.group_norm(x, 32, self.w0, self.w1, 1e-05)`."""
    kw = [f"{k}={v}" for k, v in kwargs]
    if name.startswith("op:"):
        sym = OPERATORS[name[3:]]
        if len(args) == 1:
            return f"({sym}{args[0]})"
        a, b = (args[1], args[0]) if name[3:].startswith("__r") else (args[0], args[1])
        return f"({a} {sym} {b})"
    if name.startswith("."):
        return f"{args[0]}.{name[1:]}({', '.join(args[1:] + kw)})"
    return f"{name}({', '.join(args + kw)})"


def inplace(name: str, args: tuple | list, kwargs: dict) -> bool:
    """Does the call write its input (`relu_`, `inplace=True`, given as keyword or positionally) or an
    `out=` tensor?"""
    base = name.split(".")[-1].split(":")[-1]
    if (base.endswith("_") and not base.endswith("__")) or bool(kwargs.get("inplace")) or "out" in kwargs:
        return True
    try:
        names = positional_names(resolve(name)) or ()
    except NotWritable:
        return False
    i = names.index("inplace") if "inplace" in names else -1
    return 0 <= i < len(args) and args[i] is True


def signature_matches(spec: ArgSpec, v: Any) -> bool:
    """Does a live argument fit the recorded one (same shape, dtype, stride, device; same value)?"""
    if spec.kind == "value":
        try:
            return value_src(v) == spec.src
        except NotWritable:
            return False
    if not isinstance(v, torch.Tensor):
        return False
    t = spec.tensor
    assert t is not None
    return (list(v.shape) == t.shape and dtype_name(v.dtype) == t.dtype and list(v.stride()) == t.stride
            and v.device.type == t.device)


__all__ = ["NotWritable", "arg_spec", "call_args", "func_name", "inplace", "operator", "render_call",
           "resolve", "signature_matches", "tensor_sig", "value_src"]
