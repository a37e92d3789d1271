"""Index reductions as DAG nodes: `torch.argmax` / `torch.argmin` (and the tensor methods), and the
indices of `torch.max(x, dim)` / `torch.min(x, dim)` (`[1]` or `.indices`; lower.py's getitem).

An argreduce node is `Node("argred", op="max" | "min", args=(x,), params=(dim, keepdim))`, with
dim -1 for `dim=None` (an index into the flattened tensor). Its value is int64 indices, so the
forward's output is the only thing that may read it: an op on the indices would be computed in
fp32 and stored as int64 where torch returns floats. The fx node's users are checked here, before
any kernel is planned, so no pipeline cut can hand the indices to another stage either."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from kiln.agents.builtin import lower_tables as T
from kiln.agents.builtin.ir import Node
from kiln.agents.builtin.lower_types import NOT_MINE, Lowering, MaxPair, Ref, ref_of
from kiln.agents.builtin.problem import Unsupported

SIG: T.Sig = (("input", T.REQ), ("dim", None), ("keepdim", False))
NAMES = ("argmax", "argmin")


def _name(key: Any) -> str | None:
    if isinstance(key, str):
        return key[1:] if key[1:] in NAMES else None
    return next((nm for nm in NAMES if key is getattr(torch, nm)), None)


def argreduce_call(L: Lowering, key: Any, args: list[Any], kwargs: dict[str, Any], n: torch.fx.Node) -> Any:
    """lower_extra's hook: argmax / argmin, as functions or tensor methods."""
    name = _name(key)
    if name is None:
        return NOT_MINE
    b = T.bind(SIG, args, kwargs, key if isinstance(key, str) else name)
    _only_returned([n], name)
    return indices(L, name[3:], b["input"], b["dim"], b["keepdim"])


def pair_indices(L: Lowering, pair: MaxPair) -> Ref:
    """`torch.max(x, dim)[1]` / `.indices` (min likewise): argmax(x, dim) of the pair's input."""
    if pair.node is None:
        raise Unsupported("the indices of max/min (argmax/argmin)")
    kind = "max" if pair.kind == "max" else "min"
    readers = [u for u in pair.node.users if len(u.args) > 1 and u.args[1] in (1, "indices")]
    _only_returned(readers, f"torch.{kind}(x, dim)")
    return indices(L, kind, Ref(pair.src), pair.dim, pair.keepdim)


def _only_returned(nodes: list[torch.fx.Node], what: str) -> None:
    if any(u.op != "output" for n in nodes for u in n.users):
        raise Unsupported(f"an op on {what}'s int64 indices (covered: returning them)")


def indices(L: Lowering, kind: str, x: Any, dim: Any, keepdim: Any) -> Ref:
    """The argreduce node of x along dim (None: the flattened tensor); its shape as torch's."""
    src = ref_of(x, f"arg{kind}")
    shape = L.g.nodes[src].shape
    nd = len(shape)
    if nd == 0:
        raise Unsupported(f"arg{kind} of a 0-D tensor")
    if not isinstance(keepdim, bool):
        raise Unsupported(f"arg{kind} with keepdim {keepdim!r} (covered: True or False)")
    if dim is None:
        out = (1,) * nd if keepdim else ()
        return Ref(L.g.add(Node("argred", op=kind, args=(src,), params=(-1.0, float(keepdim)), shape=out)))
    if isinstance(dim, bool) or not isinstance(dim, int) or not -nd <= dim < nd:
        raise Unsupported(f"arg{kind} with dim {dim!r} of a {nd}-D tensor")
    d = int(dim) % nd
    out = tuple(1 if i == d else s for i, s in enumerate(shape)) if keepdim else shape[:d] + shape[d + 1 :]
    return Ref(L.g.add(Node("argred", op=kind, args=(src,), params=(float(d), float(keepdim)), shape=out)))
