"""The values and helpers every lowering module shares (lower.py's Lowerer and the lower_*.py hooks
it dispatches to): DAG references, the `Lowering` interface the hooks see, and materialization.

Keeping them here, below lower.py and the hooks, keeps the lowering's imports one way: lower.py
imports the hooks, the hooks import this module, and this module imports neither."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import torch.fx

from kiln.agents.builtin.ir import KGraph
from kiln.agents.builtin.problem import Problem, Unsupported

NOT_MINE = object()  # a hook's answer for an op it does not lower


@dataclass(frozen=True)
class Ref:
    """A value in the DAG (python numbers stay numbers until used)."""

    idx: int


@dataclass(frozen=True)
class TView:
    """`.t()` of a 2-D tensor input: only usable as a matmul operand."""

    expr: str
    shape: tuple[int, ...]


class ShapeInt(int):
    """A size read from a tensor's shape at trace time: fine as a dim or a shape, never as a value."""


class DimInt(ShapeInt):
    """A size read from `x.shape` / `x.size()`: remembers the node and dim, so a view can name it
    at run time (`h0.shape[2]`) instead of baking the traced number."""

    node: int
    dim: int

    def __new__(cls, value: int, node: int, dim: int) -> DimInt:
        obj = super().__new__(cls, value)
        obj.node, obj.dim = node, dim
        return obj


@dataclass(frozen=True)
class MaxPair:
    """The (values, indices) result of torch.max/min with a dim: `[0]`/`.values` is the reduction,
    `[1]`/`.indices` an argmax/argmin of `src` along `dim` (lower_argreduce.pair_indices)."""

    values: Ref
    src: int = -1  # the reduced tensor's node
    dim: int = 0
    keepdim: bool = False
    kind: str = "max"  # "max" | "min"
    node: torch.fx.Node | None = field(default=None, compare=False)  # the max/min call (its users)


class Lowering(Protocol):
    """What the lowering hooks use of lower.Lowerer: the problem, the DAG built so far, value
    helpers, and the Lowerer's own op kinds (`_k_<kind>(name, bound args, fx node)`)."""

    p: Problem
    g: KGraph
    env: dict[torch.fx.Node, Any]

    def val(self, x: Any) -> int: ...
    def un(self, name: str, x: Any, params: tuple[float, ...] = ()) -> Ref: ...
    def bin(self, name: str, a: Any, b: Any) -> Any: ...
    def _transpose(self, x: Any) -> TView: ...
    def _k_unary(self, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any: ...
    def _k_binary(self, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any: ...
    def _k_reduce(self, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any: ...
    def _k_row(self, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any: ...
    def _k_gnorm(self, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any: ...
    def _k_bnorm(self, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any: ...
    def _k_pool(self, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any: ...
    def _k_matmul(self, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any: ...


def ref_of(x: Any, what: str) -> int:
    if not isinstance(x, Ref):
        raise Unsupported(f"{what} of a non-tensor")
    return x.idx


def out_shape(n: torch.fx.Node) -> tuple[int, ...]:
    meta = n.meta.get("tensor_meta")
    if meta is None or not hasattr(meta, "shape"):
        raise Unsupported(f"`{n.target}` with no traced output shape")
    return tuple(meta.shape)


def materialize(L: Lowering, idx: int) -> int:
    """A load of node idx's value as an intermediate tensor (idx itself when it is a load)."""
    node = L.g.nodes[idx]
    if node.kind == "load":
        return idx
    return L.g.load(L.g.cut(idx), node.shape)
