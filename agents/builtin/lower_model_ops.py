"""Ops that models spend time in and KernelBench's level 1 rarely has: group norm and adaptive
average pooling, lowered into the kernel DAG.

- `group_norm(x, G, w, b, eps)` is one `gnorm` node (its statistics are per (sample, group), its
  affine per channel, which the row template's weight roles cannot express); elementwise ops after it
  (SiLU, a residual add) fuse into its output pass (`gen_groupnorm`).
- `adaptive_avg_pool2d(x, 1)` is a mean over the last two dims with keepdim: the row template.
- `batch_norm(x, mean, var, w, b, training=False)` (inference) is elementwise: its per-channel
  vectors are read as (C, 1, ..., 1) views, broadcast along dim 1; a ReLU after it fuses.
"""

from __future__ import annotations

from typing import Any

import torch.fx

from kiln.agents.builtin.ir import Node
from kiln.agents.builtin.lower_types import Lowering, Ref
from kiln.agents.builtin.problem import Unsupported


def gnorm_op(L: Lowering, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
    x = b["input"]
    if not isinstance(x, Ref) or len(L.g.nodes[x.idx].shape) < 2:
        raise Unsupported("group_norm of a non-tensor or a tensor with fewer than 2 dims")
    groups, shape = b["num_groups"], L.g.nodes[x.idx].shape
    if not isinstance(groups, int) or isinstance(groups, bool) or shape[1] % groups:
        raise Unsupported(f"group_norm with {groups!r} groups over {shape[1]} channels")
    args, flags = [x.idx], []
    for key in ("weight", "bias"):
        v = b.get(key)
        if v is not None and not isinstance(v, Ref):
            raise Unsupported(f"group_norm {key} that is not a tensor")
        flags.append(float(v is not None))
        if v is not None:
            args.append(v.idx)
    node = Node("gnorm", op="group_norm", args=tuple(args), params=(float(groups), float(b["eps"]), *flags),
                shape=shape)
    return Ref(L.g.add(node))


def pool_op(L: Lowering, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
    from kiln.agents.builtin.lower_rows import reduce_op

    size = b["output_size"]
    if size not in (1, (1,), (1, 1), [1], [1, 1]):  # windows of unequal sizes: the pooling template
        from kiln.agents.builtin.lower_conv import adaptive

        return adaptive(L, {"input": b["input"], "output_size": size}, 2, "adaptive_avg", n)
    nd = len(L.g.nodes[b["input"].idx].shape)
    return reduce_op(L, "mean", {"input": b["input"], "dim": (nd - 2, nd - 1), "keepdim": True, "dtype": None}, n)


def bnorm_op(L: Lowering, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
    x = b["input"]
    if b["training"] or not isinstance(x, Ref) or len(L.g.nodes[x.idx].shape) < 2:
        raise Unsupported("batch_norm in training mode (batch statistics)")
    nd = len(L.g.nodes[x.idx].shape)

    def channel(v: Any) -> int:
        if not isinstance(v, Ref) or L.g.nodes[v.idx].kind != "load" or len(L.g.nodes[v.idx].shape) != 1:
            raise Unsupported("batch_norm statistics or affine that are not 1-D inputs or parameters")
        expr = L.g.inputs[L.g.nodes[v.idx].input].expr
        return L.g.load(f"{expr}.view(-1{', 1' * (nd - 2)})", (L.g.nodes[v.idx].shape[0],) + (1,) * (nd - 2))

    g = L.g
    y = g.op("sub", x.idx, channel(b["running_mean"]))
    y = g.op("mul", y, g.op("rsqrt", g.op("add", channel(b["running_var"]), g.const(float(b["eps"])))))
    if b.get("weight") is not None:
        y = g.op("mul", y, channel(b["weight"]))
    if b.get("bias") is not None:
        y = g.op("add", y, channel(b["bias"]))
    return Ref(y)
