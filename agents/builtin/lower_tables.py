"""Which torch functions, tensor methods and Python operators the built-in coder covers, and
their argument signatures (so positional and keyword calls lower the same way)."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from kiln.agents.builtin.problem import Unsupported

REQ = object()  # a required argument
Sig = tuple[tuple[str, Any], ...]

X: Sig = (("input", REQ),)
XI: Sig = (("input", REQ), ("inplace", False))
BIN: Sig = (("input", REQ), ("other", REQ), ("alpha", 1), ("rounding_mode", None))
RED: Sig = (("input", REQ), ("dim", None), ("keepdim", False), ("dtype", None))
LOSS2: Sig = (("input", REQ), ("target", REQ), ("size_average", None), ("reduce", None))
SOFT: Sig = (("input", REQ), ("dim", None), ("_stacklevel", 3), ("dtype", None))

UNARY = [
    "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "abs", "neg", "square", "reciprocal",
    "sin", "cos", "erf", "silu", "mish", "softsign", "selu", "hardsigmoid", "hardswish", "relu6",
]  # fmt: skip

# name -> (kind, signature); kinds map to Lowerer._k_<kind>
SPECS: dict[str, tuple[str, Sig]] = {u: ("unary", XI) for u in UNARY}
SPECS |= {
    "identity": ("unary", XI),
    "gelu": ("unary", (("input", REQ), ("approximate", "none"))),
    "leaky_relu": ("unary", (("input", REQ), ("negative_slope", 0.01), ("inplace", False))),
    "elu": ("unary", (("input", REQ), ("alpha", 1.0), ("inplace", False))),
    "softplus": ("unary", (("input", REQ), ("beta", 1.0), ("threshold", 20.0))),
    "hardtanh": ("unary", (("input", REQ), ("min_val", -1.0), ("max_val", 1.0), ("inplace", False))),
    "add": ("binary", BIN), "sub": ("binary", BIN), "mul": ("binary", BIN), "div": ("binary", BIN),
    "maximum": ("binary", BIN), "minimum": ("binary", BIN),
    "pow": ("pow", (("input", REQ), ("exponent", REQ))),
    "clamp": ("clamp", (("input", REQ), ("min", None), ("max", None))),
    "clamp_min": ("clamp", (("input", REQ), ("min", REQ))),
    "clamp_max": ("clamp", (("input", REQ), ("max", REQ))),
    "sum": ("reduce", RED), "mean": ("reduce", RED),
    "amax": ("reduce", RED), "amin": ("reduce", RED), "max": ("reduce", RED), "min": ("reduce", RED),
    "softmax": ("row", SOFT), "log_softmax": ("row", SOFT),
    "layer_norm": ("row", (("input", REQ), ("normalized_shape", REQ), ("weight", None), ("bias", None), ("eps", 1e-5))),
    "rms_norm": ("row", (("input", REQ), ("normalized_shape", REQ), ("weight", None), ("eps", None))),
    "matmul": ("matmul", (("input", REQ), ("other", REQ))),
    "mm": ("matmul", (("input", REQ), ("other", REQ))),
    "linear": ("matmul", (("input", REQ), ("weight", REQ), ("bias", None))),
    "group_norm": ("gnorm", (("input", REQ), ("num_groups", REQ), ("weight", None), ("bias", None), ("eps", 1e-5))),
    "adaptive_avg_pool2d": ("pool", (("input", REQ), ("output_size", REQ))),
    "batch_norm": ("bnorm", (("input", REQ), ("running_mean", REQ), ("running_var", REQ), ("weight", None),
                             ("bias", None), ("training", False), ("momentum", 0.1), ("eps", 1e-5))),
    "t": ("transpose", X),
    "transpose": ("transpose", (("input", REQ), ("dim0", 0), ("dim1", 1))),
    "contiguous": ("unary", X),
    "norm": ("norm", (("input", REQ), ("p", "fro"), ("dim", None), ("keepdim", False), ("out", None), ("dtype", None))),
    "vector_norm": ("norm", (("input", REQ), ("ord", 2), ("dim", None), ("keepdim", False), ("dtype", None))),
    "smooth_l1_loss": ("loss", (*LOSS2, ("reduction", "mean"), ("beta", 1.0), ("weight", None))),
    "huber_loss": ("loss", (("input", REQ), ("target", REQ), ("reduction", "mean"), ("delta", 1.0), ("weight", None))),
    "kl_div": ("loss", (*LOSS2, ("reduction", "mean"), ("log_target", False))),
    "mse_loss": ("loss", (*LOSS2, ("reduction", "mean"), ("weight", None))),
    "l1_loss": ("loss", (*LOSS2, ("reduction", "mean"), ("weight", None))),
    "triplet_margin_loss": ("loss", (("anchor", REQ), ("positive", REQ), ("negative", REQ), ("margin", 1.0), ("p", 2.0),
                                     ("eps", 1e-6), ("swap", False), ("size_average", None), ("reduce", None),
                                     ("reduction", "mean"))),
    "einsum": ("einsum", (("equation", REQ), ("a", REQ), ("b", None), ("c", None))),
    "bmm": ("matmul", (("input", REQ), ("other", REQ))),
    "triu": ("band", (("input", REQ), ("diagonal", 0))),
    "tril": ("band", (("input", REQ), ("diagonal", 0))),
}  # fmt: skip

ALIASES: dict[Any, str] = {
    operator.add: "add", operator.sub: "sub", operator.mul: "mul", operator.truediv: "div",
    operator.neg: "neg", operator.pow: "pow", operator.matmul: "matmul",
    torch.true_divide: "div", torch.special.erf: "erf", ".contiguous": "identity",
    torch.linalg.vector_norm: "vector_norm",
}  # fmt: skip


def lookup(key: Any) -> tuple[str, str, Sig] | None:
    """(kind, canonical name, signature) for an fx call target, or None when not covered."""
    if key in ALIASES:
        name: str | None = ALIASES[key]
    elif isinstance(key, str):
        name = key[1:]
    else:
        nm = getattr(key, "__name__", "")
        name = nm if getattr(torch, nm, None) is key or getattr(F, nm, None) is key else None
    if name not in SPECS:
        return None
    kind, sig = SPECS[name]
    return kind, name, sig


def bind(sig: Sig, args: list[Any], kwargs: dict[str, Any], key: Any) -> dict[str, Any]:
    names = [n for n, _ in sig]
    if len(args) > len(names):
        raise Unsupported(f"`{key}` called with {len(args)} positional arguments")
    out = dict(zip(names, args, strict=False))
    for k, v in kwargs.items():
        if k not in names:
            raise Unsupported(f"`{key}` with argument `{k}`")
        out[k] = v
    for n, default in sig:
        if n not in out:
            if default is REQ:
                raise Unsupported(f"`{key}` without its `{n}` argument")
            out[n] = default
    return out


def _gelu(b: dict[str, Any]) -> tuple[str, tuple[float, ...]]:
    if b["approximate"] not in ("none", "tanh"):
        raise Unsupported(f"gelu approximate={b['approximate']!r}")
    return ("gelu" if b["approximate"] == "none" else "gelu_tanh"), ()


PARAMETRIC: dict[str, Callable[[dict[str, Any]], tuple[str, tuple[float, ...]]]] = {
    "gelu": _gelu,
    "leaky_relu": lambda b: ("leaky_relu", (float(b["negative_slope"]),)),
    "elu": lambda b: ("elu", (float(b["alpha"]),)),
    "softplus": lambda b: ("softplus", (float(b["beta"]), float(b["threshold"]))),
    "hardtanh": lambda b: ("clamp", (float(b["min_val"]), float(b["max_val"]))),
    "relu6": lambda b: ("clamp", (0.0, 6.0)),
}


def unary_op(name: str, b: dict[str, Any]) -> tuple[str, tuple[float, ...]]:
    return PARAMETRIC[name](b) if name in PARAMETRIC else (name, ())


def fold(name: str, a: Any, b: Any) -> Any:
    """Constant-fold an op on two Python numbers."""
    fns: dict[str, Callable[[Any, Any], Any]] = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
           "maximum": max, "minimum": min}  # fmt: skip
    return fns[name](a, b)
