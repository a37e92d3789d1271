"""Reductions, row ops (softmax, log-softmax, layer_norm, rms_norm) and matmul/linear, lowered
into DAG nodes. Composite ops become reductions plus elementwise ops so one template fuses them."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from kiln.agents.builtin.ir import Node
from kiln.agents.builtin.lower_types import Lowering, MaxPair, Ref, TView, materialize
from kiln.agents.builtin.problem import Unsupported


def _ref(x: Any, what: str) -> Any:
    if not isinstance(x, Ref):
        raise Unsupported(f"{what} of a non-tensor")
    return x


def _dims(dim: Any, nd: int) -> tuple[int, ...]:
    if dim is None or dim == () or dim == []:
        return tuple(range(nd))
    ds = [dim] if isinstance(dim, int) else list(dim)
    if not all(isinstance(d, int) for d in ds):
        raise Unsupported("a reduction dim that is not a constant int")
    return tuple(sorted({d % nd for d in ds}))


def _mean(L: Lowering, x: int, dims: tuple[int, ...], keepdim: bool) -> int:
    s = L.g.reduce("sum", x, dims, keepdim)
    return L.g.op("div", s, L.g.add(Node("rsize")))


def reduce_op(L: Lowering, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
    if name in ("max", "min") and isinstance(b["dim"], Ref):
        return L.bin("maximum" if name == "max" else "minimum", b["input"], b["dim"])
    if b.get("dtype") is not None:
        raise Unsupported(f"{name} with a dtype argument")
    x = _ref(b["input"], name).idx
    dims = _dims(b["dim"], len(L.g.nodes[x].shape))
    keep = bool(b["keepdim"])
    if name == "mean":
        return Ref(_mean(L, x, dims, keep))
    kind = {"sum": "sum", "amax": "max", "amin": "min", "max": "max", "min": "min"}[name]
    out = Ref(L.g.reduce(kind, x, dims, keep))
    if name in ("max", "min") and b["dim"] is not None:  # (values, indices)
        return MaxPair(out, x, dims[0], keep, kind, n) if len(dims) == 1 else MaxPair(out)
    return out


def row_op(L: Lowering, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
    x = _ref(b["input"], name).idx
    nd = len(L.g.nodes[x].shape)
    if name in ("softmax", "log_softmax"):
        if b["dim"] is None or b.get("dtype") is not None:
            raise Unsupported(f"{name} without an explicit dim, or with a dtype")
        return Ref(_softmax(L, x, _dims(b["dim"], nd), name == "log_softmax"))
    shape = tuple(b["normalized_shape"]) if not isinstance(b["normalized_shape"], int) else (b["normalized_shape"],)
    dims = tuple(range(nd - len(shape), nd))
    if name == "layer_norm":
        return Ref(_layer_norm(L, x, dims, b))
    return Ref(_rms_norm(L, x, dims, b))


def _softmax(L: Lowering, x: int, dims: tuple[int, ...], log: bool) -> int:
    g = L.g
    z = g.op("sub", x, g.reduce("max", x, dims, True))
    e = g.op("exp", z)
    s = g.reduce("sum", e, dims, True)
    return g.op("sub", z, g.op("log", s)) if log else g.op("div", e, s)


def _affine(L: Lowering, y: int, w: Any, bias: Any) -> int:
    if w is not None:
        y = L.g.op("mul", y, _ref(w, "norm weight").idx)
    if bias is not None:
        y = L.g.op("add", y, _ref(bias, "norm bias").idx)
    return y


def _layer_norm(L: Lowering, x: int, dims: tuple[int, ...], b: dict[str, Any]) -> int:
    g = L.g
    d = g.op("sub", x, _mean(L, x, dims, True))  # two-pass variance: mean first, then (x-mean)^2
    var = _mean(L, g.op("mul", d, d), dims, True)
    y = g.op("mul", d, g.op("rsqrt", g.op("add", var, g.const(float(b["eps"])))))
    return _affine(L, y, b["weight"], b["bias"])


def _rms_norm(L: Lowering, x: int, dims: tuple[int, ...], b: dict[str, Any]) -> int:
    g = L.g
    eps = b["eps"] if b["eps"] is not None else torch.finfo(torch.float32).eps
    ms = _mean(L, g.op("mul", x, x), dims, True)
    y = g.op("mul", x, g.op("rsqrt", g.op("add", ms, g.const(float(eps)))))
    return _affine(L, y, b["weight"], None)


def _operand(L: Lowering, x: Any) -> int:
    if isinstance(x, TView):
        return L.g.load(x.expr, x.shape, transposed=True)
    if isinstance(x, Ref) and L.g.nodes[x.idx].kind == "load":
        return x.idx
    if isinstance(x, Ref):  # computed in forward: an earlier kernel writes it (pipeline.py)
        return materialize(L, x.idx)
    raise Unsupported("a matmul operand that is not a tensor")


def matmul_op(L: Lowering, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
    a = _operand(L, b["input"])
    other = b["other"] if name != "linear" else L._transpose(_ref(b["weight"], "linear weight"))
    w = _operand(L, other)
    sa, sw = L.g.nodes[a].shape, L.g.nodes[w].shape
    if len(sw) == 3 and len(sa) == 3 and sa[0] == sw[0] and sa[2] == sw[1]:  # bmm: (B, M, K) x (B, K, N)
        if any(L.g.inputs[L.g.nodes[i].input].transposed for i in (a, w)):
            raise Unsupported("a transposed batched matmul operand")
        return Ref(L.g.add(Node("mm", args=(a, w), shape=(sa[0], sa[1], sw[2]))))
    if len(sw) != 2 or len(sa) < 2:
        raise Unsupported(f"matmul of shapes {list(sa)} x {list(sw)} (covered: (..., K) x (K, N) and (B, M, K) x (B, K, N))")
    if len(sa) > 2 and L.g.inputs[L.g.nodes[a].input].transposed:
        raise Unsupported("a transposed batched matmul operand")
    out = Ref(L.g.add(Node("mm", args=(a, w), shape=tuple(sa[:-1]) + (sw[1],))))
    return L.bin("add", out, b["bias"]) if b.get("bias") is not None else out
