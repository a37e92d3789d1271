"""Scans (cumulative sums and products) as DAG nodes, and the view patterns KernelBench builds
them from: a reverse scan `x.flip(d).cumsum(d).flip(d)`, an exclusive scan
`cat((zeros_like(x.select(d, 0).unsqueeze(d)), x.narrow(d, 0, x.size(d) - 1).cumsum(d)), d)`.

A scan node is `Node("scan", op="sum" | "prod", args=(x,), params=(dim, reverse, exclusive, trim))`.
Along `dim` of x (length N) it has OUT = N - trim values, out[i] = x[0] op ... op x[i - exclusive]
(the empty prefix is the identity, 0 or 1); reverse: the same along the flipped dim.

`flip`, `narrow` and `zeros_like`/`ones_like` lower to markers (Flipped, Narrowed, Filled) that
only a scan, or a cat around a scan, consumes: anywhere else they are refused as operands. A
narrow length must be the tensor's own size minus a constant (`x.size(d) - 1`), so stress sizes
keep the pattern; `x.size(d) - c` is a SizeOff (a size read at run time, never a value)."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from kiln.agents.builtin import lower_tables as T
from kiln.agents.builtin.ir import Node
from kiln.agents.builtin.lower_types import (
    NOT_MINE,
    DimInt,
    Lowering,
    Ref,
    ShapeInt,
    materialize,
    out_shape,
    ref_of,
)
from kiln.agents.builtin.problem import Unsupported

REQ = T.REQ
IDENTITY = {"sum": 0.0, "prod": 1.0}


@dataclass(frozen=True)
class Flipped:
    """`x.flip(dim)` of a DAG value: only a scan along the same dim (or a flip back) reads it."""

    ref: Ref
    dim: int


@dataclass(frozen=True)
class Narrowed:
    """`x.narrow(dim, 0, x.size(dim) - trim)`: only a scan along the same dim reads it."""

    ref: Ref
    dim: int
    trim: int


@dataclass(frozen=True)
class Filled:
    """`zeros_like(t)` / `ones_like(t)`: only the leading part of a cat into an exclusive scan."""

    shape: tuple[int, ...]
    value: float


class SizeOff(ShapeInt):
    """`x.size(dim) + off` (off a Python int): a size, so a narrow length can name it at run time."""

    node: int
    dim: int
    off: int

    def __new__(cls, value: int, node: int, dim: int, off: int) -> SizeOff:
        obj = super().__new__(cls, value)
        obj.node, obj.dim, obj.off = node, dim, off
        return obj


SCAN: T.Sig = (("input", REQ), ("dim", REQ), ("dtype", None))
SIGS: dict[str, T.Sig] = {
    "cumsum": SCAN, "cumprod": SCAN,
    "narrow": (("input", REQ), ("dim", REQ), ("start", REQ), ("length", REQ)),
    "select": (("input", REQ), ("dim", REQ), ("index", REQ)),
    "zeros_like": (("input", REQ),), "ones_like": (("input", REQ),),
    "cat": (("tensors", REQ), ("dim", 0)),
}  # fmt: skip
CAT_ALIASES = {"concat": "cat", "concatenate": "cat"}
NARROW = "narrow other than x.narrow(d, 0, x.size(d) - c) (covered: before a cumsum/cumprod)"
CAT = "torch.cat (covered: zeros_like/ones_like before a cumsum/cumprod, an exclusive scan)"


def _name(key: Any) -> str | None:
    if isinstance(key, str):
        name = key[1:]
        return name if name in SIGS or name == "flip" else None
    for name in [*SIGS, "flip", *CAT_ALIASES]:
        if key is getattr(torch, name, None):
            return CAT_ALIASES.get(name, name)
    return None


def scan_call(L: Lowering, key: Any, args: list[Any], kwargs: dict[str, Any], n: torch.fx.Node) -> Any:
    """lower_extra's hook: scans, the markers around them, and sizes minus constants."""
    if key in (operator.sub, operator.add) and not kwargs and len(args) == 2:
        return _size_arith(key, args[0], args[1])
    name = _name(key)
    if name is None:
        return NOT_MINE
    if name == "flip":
        return _flip(L, args, kwargs, n)
    b = T.bind(SIGS[name], args, kwargs, key if isinstance(key, str) else name)
    return _FUNCS[name](L, name, b, n)


def _size_arith(key: Any, a: Any, b: Any) -> Any:

    def plain(v: Any) -> bool:
        return type(v) is int

    if key is operator.add and plain(a) and isinstance(b, DimInt | SizeOff):
        a, b = b, a
    if not (isinstance(a, DimInt | SizeOff) and plain(b)):
        return NOT_MINE
    off = (a.off if isinstance(a, SizeOff) else 0) + (b if key is operator.add else -b)
    return SizeOff(int(a) + (b if key is operator.add else -b), a.node, a.dim, off)


def _dim(d: Any, ndim: int, what: str) -> int:
    if isinstance(d, bool) or not isinstance(d, int) or not -ndim <= d < max(ndim, 1):
        raise Unsupported(f"{what} with dim {d!r} of a {ndim}-D tensor")
    return int(d) % max(ndim, 1)


def _ndim(L: Lowering, x: Any, what: str) -> int:
    return len(L.g.nodes[ref_of(x, what)].shape)


def _flip(L: Lowering, args: list[Any], kwargs: dict[str, Any], n: torch.fx.Node) -> Any:
    x, rest = args[0], list(args[1:]) + ([kwargs["dims"]] if "dims" in kwargs else [])
    dims = rest[0] if len(rest) == 1 and isinstance(rest[0], tuple | list) else rest
    if set(kwargs) - {"dims"} or len(dims) != 1:
        raise Unsupported("flip of other than one dim (covered: around a cumsum/cumprod along that dim)")
    if isinstance(x, Flipped):
        if _dim(dims[0], len(out_shape(n)), "flip") != x.dim:
            raise Unsupported("flips along two different dims")
        return x.ref
    return Flipped(Ref(ref_of(x, "flip")), _dim(dims[0], _ndim(L, x, "flip"), "flip"))


def _scan(L: Lowering, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
    if b["dtype"] is not None:
        raise Unsupported(f"{name} with a dtype")
    x, kind = b["input"], name[3:]  # "sum" | "prod"
    nd = len(out_shape(n))
    if nd == 0:
        raise Unsupported(f"{name} of a 0-D tensor")
    d = _dim(b["dim"], nd, name)
    if isinstance(x, Flipped):
        if x.dim != d:
            raise Unsupported(f"{name} of a tensor flipped along another dim")
        return Flipped(Ref(_node(L, kind, x.ref.idx, d, (1, 0, 0), n)), d)
    if isinstance(x, Narrowed):
        if x.dim != d:
            raise Unsupported(f"{name} of a tensor narrowed along another dim")
        return Ref(_node(L, kind, x.ref.idx, d, (0, 0, x.trim), n))
    return Ref(_node(L, kind, ref_of(x, name), d, (0, 0, 0), n))


def _node(L: Lowering, kind: str, x: int, d: int, flags: tuple[int, int, int], n: torch.fx.Node) -> int:
    params = (float(d), *map(float, flags))
    return L.g.add(Node("scan", op=kind, args=(x,), params=params, shape=out_shape(n)))


def _narrow(L: Lowering, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
    x = ref_of(b["input"], "narrow")
    d, length = _dim(b["dim"], _ndim(L, b["input"], "narrow"), "narrow"), b["length"]
    trim = -getattr(length, "off", 0)
    own = isinstance(length, ShapeInt) and getattr(length, "node", None) == x and getattr(length, "dim", None) == d
    if b["start"] != 0 or not own or trim < 0:
        raise Unsupported(NARROW)
    return Narrowed(Ref(x), d, trim)


def _select(L: Lowering, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
    """A view: `x.select(d, i)` of an input (a computed x is materialized first)."""
    x = materialize(L, ref_of(b["input"], "select"))
    d, i = b["dim"], b["index"]
    if isinstance(i, bool) or not isinstance(i, int) or isinstance(i, ShapeInt):
        raise Unsupported("select with an index that is not a Python int")
    d = _dim(d, len(L.g.nodes[x].shape), "select")
    return Ref(L.g.load(f"{L.g.inputs[L.g.nodes[x].input].expr}.select({d}, {int(i)})", out_shape(n)))


def _fill(L: Lowering, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
    ref_of(b["input"], name)
    return Filled(out_shape(n), 0.0 if name == "zeros_like" else 1.0)


def _cat(L: Lowering, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
    """cat((identity fill of size 1 along d, inclusive scan trimmed by t >= 1), d): the exclusive scan."""
    parts, shape = b["tensors"], out_shape(n)
    refuse = Unsupported(CAT)
    if not isinstance(parts, tuple | list) or len(parts) != 2 or not isinstance(parts[0], Filled):
        raise refuse
    fill, body = parts
    if not isinstance(body, Ref) or L.g.nodes[body.idx].kind != "scan":
        raise refuse
    node = L.g.nodes[body.idx]
    d, rev, excl, trim = (int(p) for p in node.params)
    want = tuple(1 if i == d else s for i, s in enumerate(shape))
    if _dim(b["dim"], len(shape), "cat") != d or rev or excl or trim < 1 or fill.shape != want:
        raise refuse
    if fill.value != IDENTITY[node.op]:
        raise refuse
    return Ref(_node(L, node.op, node.args[0], d, (0, 1, trim - 1), n))


_FUNCS = {"cumsum": _scan, "cumprod": _scan, "narrow": _narrow, "select": _select, "zeros_like": _fill,
          "ones_like": _fill, "cat": _cat}  # fmt: skip
