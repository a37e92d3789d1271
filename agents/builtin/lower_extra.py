"""Lowering hooks for the ops the pipeline families cover: convolutions, pooling, attention,
batch/instance norm, logsumexp, scans (lower_scan), argmax/argmin (lower_argreduce), cross-entropy
(lower_crossent), views of computed tensors, clone/detach and `torch.tensor(c)`.

`extra_call` runs before the Lowerer's own table (it answers NOT_MINE for everything else);
`extra_module` runs after lower_modules found no match. A view of a computed tensor materializes
it (`KGraph.cut`): an earlier kernel writes it, and the view is a load of that intermediate."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from kiln.agents.builtin import lower_argreduce as A
from kiln.agents.builtin import lower_conv as C
from kiln.agents.builtin import lower_crossent as X
from kiln.agents.builtin import lower_norms as N
from kiln.agents.builtin import lower_scan as S
from kiln.agents.builtin import lower_tables as T
from kiln.agents.builtin.lower_types import NOT_MINE, DimInt, Lowering, Ref, materialize, out_shape
from kiln.agents.builtin.problem import Unsupported

DEVICE = object()  # `x.device`: only ever passed on to torch.tensor(..., device=...)
REQ = T.REQ


def _ref(L: Lowering, x: Any, what: str) -> int:
    if not isinstance(x, Ref):
        raise Unsupported(f"{what} of a non-tensor")
    return x.idx


def source_expr(L: Lowering, idx: int) -> str:
    """How a stage names node idx's tensor: its input expression, or its intermediate's name."""
    idx = materialize(L, idx)
    return L.g.inputs[L.g.nodes[idx].input].expr


# ---------------------------------------------------------------------------- shapes and views


def _dims_of(L: Lowering, x: Any) -> tuple[DimInt, ...]:
    idx = _ref(L, x, "shape")
    return tuple(DimInt(v, idx, d) for d, v in enumerate(L.g.nodes[idx].shape))


def dim_expr(L: Lowering, v: Any) -> str:
    """A view argument as run-time Python: a DimInt names its tensor's size, ints stay ints."""
    if isinstance(v, DimInt):
        node = L.g.nodes[v.node]
        if node.kind == "load":
            return f"{L.g.inputs[node.input].expr}.shape[{v.dim}]"
        if v.node in L.g.cuts:
            return f"{L.g.cuts[v.node]}.shape[{v.dim}]"
        for j in range(v.node, -1, -1):  # an input of the same shape names the same size
            nj = L.g.nodes[j]
            if nj.kind == "load" and nj.shape == node.shape:
                return f"{L.g.inputs[nj.input].expr}.shape[{v.dim}]"
    if isinstance(v, bool) or not isinstance(v, int):
        raise Unsupported(f"a view size of type {type(v).__name__}")
    return str(int(v))


def _view(L: Lowering, method: str, x: Any, args: list[Any], n: torch.fx.Node) -> Any:
    idx = _ref(L, x, f"`.{method}`")
    sizes = args[0] if len(args) == 1 and isinstance(args[0], tuple | list) else args
    text = ", ".join(dim_expr(L, a) for a in sizes)
    return Ref(L.g.load(f"{source_expr(L, idx)}.{method}({text})", out_shape(n)))


VIEWS = {"view": "view", "reshape": "reshape", "flatten": "flatten", "unsqueeze": "unsqueeze", "squeeze": "squeeze"}
IDENTITY = {"clone", "detach"}


def _method_name(key: Any) -> str | None:
    if isinstance(key, str):
        return key[1:]
    for name in list(VIEWS) + list(IDENTITY):
        if key is getattr(torch, name, None):
            return name
    return None


def _views_and_friends(L: Lowering, key: Any, args: list[Any], kwargs: dict[str, Any], n: torch.fx.Node) -> Any:
    if key is getattr and len(args) == 2 and isinstance(args[0], Ref) and args[1] in ("shape", "device"):
        return _dims_of(L, args[0]) if args[1] == "shape" else DEVICE
    name = _method_name(key)
    if name == "size" and isinstance(args[0], Ref):
        dims = _dims_of(L, args[0])
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        return dims if dim is None else dims[int(dim)]
    if name in IDENTITY and isinstance(args[0], Ref) and not kwargs.get("memory_format"):
        return args[0]
    if name in VIEWS and args and isinstance(args[0], Ref):
        rest = list(args[1:]) + [kwargs[k] for k in ("start_dim", "end_dim", "dim") if k in kwargs]
        return _view(L, VIEWS[name], args[0], rest, n)
    return NOT_MINE


# ---------------------------------------------------------------------------- functional calls

SIGS: dict[str, T.Sig] = {
    "tensor": (("data", REQ), ("dtype", None), ("device", None), ("requires_grad", False)),
    "logsumexp": (("input", REQ), ("dim", REQ), ("keepdim", False)),
    "dropout": (("input", REQ), ("p", 0.5), ("training", True), ("inplace", False)),
    "instance_norm": (("input", REQ), ("running_mean", None), ("running_var", None), ("weight", None),
                      ("bias", None), ("use_input_stats", True), ("momentum", 0.1), ("eps", 1e-5)),
    "batch_norm": (("input", REQ), ("running_mean", REQ), ("running_var", REQ), ("weight", None),
                   ("bias", None), ("training", False), ("momentum", 0.1), ("eps", 1e-5)),
} | C.SIGS  # fmt: skip

_FN: dict[Any, str] = {}


def _fn_name(key: Any) -> str | None:
    if not _FN:
        for name in SIGS:  # F's function when there is one (torch.batch_norm takes other arguments)
            fn = getattr(F, name, None) or getattr(torch, name, None)
            if fn is not None:
                _FN[fn] = name
    try:
        return _FN.get(key)
    except TypeError:  # unhashable targets
        return None


ALIASES = {torch.multiply: "mul", torch.subtract: "sub", torch.divide: "div"}


def extra_call(L: Lowering, key: Any, args: list[Any], kwargs: dict[str, Any], n: torch.fx.Node) -> Any:
    hit = _views_and_friends(L, key, args, kwargs, n)
    if hit is NOT_MINE:
        hit = S.scan_call(L, key, args, kwargs, n)  # cumsum / cumprod and the views around them
    if hit is NOT_MINE:
        hit = A.argreduce_call(L, key, args, kwargs, n)  # argmax / argmin
    if hit is NOT_MINE:
        hit = X.crossent_call(L, key, args, kwargs, n)  # F.cross_entropy
    if hit is not NOT_MINE:
        return hit
    if key in ALIASES and not set(kwargs) - {"other"}:
        return L._k_binary(ALIASES[key], {"input": args[0], "other": args[1] if len(args) > 1 else kwargs["other"]}, n)
    name = _fn_name(key)
    if name is None:
        return NOT_MINE
    b = T.bind(SIGS[name], args, kwargs, key if isinstance(key, str) else name)
    if name == "batch_norm" and not b["training"]:
        return NOT_MINE  # inference batch norm: lower_model_ops (elementwise)
    return _FUNCS[name](L, name, b, n)


def _tensor(L: Lowering, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
    v = b["data"]
    if isinstance(v, bool) or not isinstance(v, int | float) or b["dtype"] is not None:
        raise Unsupported("torch.tensor of anything but one Python number")
    return Ref(L.g.const(float(v)))


def _logsumexp(L: Lowering, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
    x, keep = b["input"], bool(b["keepdim"])
    red = {"input": x, "dim": b["dim"], "dtype": None}
    m = L._k_reduce("amax", red | {"keepdim": True}, n)
    s = L._k_reduce("sum", red | {"input": Ref(L.g.op("exp", L.g.op("sub", x.idx, m.idx))), "keepdim": keep}, n)
    m_out = m if keep else L._k_reduce("amax", red | {"keepdim": False}, n)
    return Ref(L.g.op("add", L.g.op("log", s.idx), m_out.idx))


def _dropout(L: Lowering, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
    if float(b["p"]) == 0.0 or not b["training"]:
        return b["input"]
    raise Unsupported("dropout with p > 0 in training mode (a random output no kernel can match)")


def _instance_norm(L: Lowering, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
    if not b["use_input_stats"]:
        raise Unsupported("instance_norm with running statistics")
    return N.instance_norm(L, b["input"], b["weight"], b["bias"], float(b["eps"]), n)


def _batch_norm(L: Lowering, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
    return N.batch_norm_train(L, b["input"], b, n)


_FUNCS = {"tensor": _tensor, "logsumexp": _logsumexp, "dropout": _dropout, "instance_norm": _instance_norm,
          "batch_norm": _batch_norm} | C.FUNCS  # fmt: skip


# ---------------------------------------------------------------------------- modules


def extra_module(L: Lowering, mod: nn.Module, path: str, x: Any, n: torch.fx.Node) -> Any:
    hit = C.lower_module(L, mod, path, x, n)
    if hit is not NOT_MINE:
        return hit
    if isinstance(mod, nn.Dropout | nn.Dropout1d | nn.Dropout2d | nn.Dropout3d):
        return _dropout(L, "dropout", {"input": x, "p": mod.p, "training": mod.training}, n)
    if isinstance(mod, nn.Flatten):
        return _view(L, "flatten", x, [mod.start_dim, mod.end_dim], n)
    raise Unsupported(f"module `{type(mod).__name__}`")
