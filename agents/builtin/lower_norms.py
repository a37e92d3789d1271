"""Batch norm in training mode and instance norm, lowered into DAG nodes: batch statistics are a
`chanstats` node (its own kernel) and an elementwise normalise; instance norm is a layer norm over
the spatial dims (the row template), its per-channel affine an elementwise kernel after it."""

from __future__ import annotations

from typing import Any

import torch.fx
import torch.nn as nn

from kiln.agents.builtin.ir import Node
from kiln.agents.builtin.lower_types import NOT_MINE, Lowering, Ref, materialize, ref_of
from kiln.agents.builtin.problem import Unsupported


def _channel_view(L: Lowering, v: Any, nd: int, what: str) -> int:
    vi = ref_of(v, what)
    node = L.g.nodes[vi]
    if node.kind != "load" or len(node.shape) != 1:
        raise Unsupported(f"{what} that is not a 1-D input or parameter")
    expr = L.g.inputs[node.input].expr
    return L.g.load(f"{expr}.view(1, -1{', 1' * (nd - 2)})", (1, node.shape[0]) + (1,) * (nd - 2))


def batch_norm_train(L: Lowering, x: Any, b: dict[str, Any], n: torch.fx.Node, nbt: str | None = None) -> Any:
    """Batch statistics per channel (dim 1) over every other dim: a `chanstats` kernel writes
    (mean, rstd) and updates the running statistics as torch does; normalising is elementwise."""
    xi = materialize(L, ref_of(x, "batch_norm input"))
    shape = L.g.nodes[xi].shape
    if len(shape) < 2:
        raise Unsupported("batch_norm of a tensor with fewer than 2 dims")
    args, running = [xi], b.get("running_mean") is not None and b.get("running_var") is not None
    if running:
        args += [ref_of(b["running_mean"], "running_mean"), ref_of(b["running_var"], "running_var")]
        if nbt is not None:
            args.append(L.g.load(nbt, ()))
    mom = b.get("momentum")
    params = (float(b["eps"]), -1.0 if mom is None else float(mom), float(running), float(nbt is not None))
    stats = L.g.add(Node("chanstats", op="batch_norm", args=tuple(args), params=params, shape=(2, shape[1])))
    name, nd = L.g.cut(stats), len(shape)
    view = f".view(1, -1{', 1' * (nd - 2)})"
    cshape = (1, shape[1]) + (1,) * (nd - 2)
    y = L.g.op("sub", xi, L.g.load(f"{name}[0]{view}", cshape))
    y = L.g.op("mul", y, L.g.load(f"{name}[1]{view}", cshape))
    if b.get("weight") is not None:
        y = L.g.op("mul", y, _channel_view(L, b["weight"], nd, "batch_norm weight"))
    if b.get("bias") is not None:
        y = L.g.op("add", y, _channel_view(L, b["bias"], nd, "batch_norm bias"))
    return Ref(y)


def instance_norm(L: Lowering, x: Any, w: Any, bias: Any, eps: float, n: torch.fx.Node, lead: int = 2) -> Any:
    """Per-(sample, channel) statistics over the spatial dims: a layer norm over dims lead.. (the
    row template); a per-channel affine, which the row template cannot broadcast, runs after it."""
    xi = ref_of(x, "instance_norm input")
    shape = L.g.nodes[xi].shape
    if len(shape) <= lead:
        raise Unsupported("instance_norm of a tensor without spatial dims")
    y = L._k_row("layer_norm", {"input": x, "normalized_shape": tuple(shape[lead:]), "weight": None, "bias": None,
                                "eps": eps}, n)  # fmt: skip
    if w is None and bias is None:
        return y
    yi, nd = materialize(L, y.idx), len(shape)
    if lead != 2:
        raise Unsupported("an affine instance_norm of an unbatched input")
    if w is not None:
        yi = L.g.op("mul", yi, _channel_view(L, w, nd, "instance_norm weight"))
    if bias is not None:
        yi = L.g.op("add", yi, _channel_view(L, bias, nd, "instance_norm bias"))
    return Ref(yi)


def norm_module(L: Lowering, mod: nn.Module, path: str, x: Any, n: torch.fx.Node) -> Any:
    def param(name: str) -> Any:
        t = getattr(mod, name, None)
        return None if t is None else Ref(L.g.load(f"self.{path}.{name}", tuple(t.shape)))

    if isinstance(mod, nn.modules.batchnorm._BatchNorm):
        b = {"weight": param("weight"), "bias": param("bias"), "eps": mod.eps, "momentum": mod.momentum}
        if not mod.training and mod.track_running_stats:
            b |= {"input": x, "running_mean": param("running_mean"), "running_var": param("running_var")}
            return L._k_bnorm("batch_norm", b | {"training": False}, n)
        b |= {"running_mean": param("running_mean"), "running_var": param("running_var")}
        nbt = f"self.{path}.num_batches_tracked" if mod.track_running_stats else None
        return batch_norm_train(L, x, b, n, nbt)
    if isinstance(mod, nn.modules.instancenorm._InstanceNorm):
        if mod.track_running_stats:
            raise Unsupported("instance norm with track_running_stats=True")
        nsp = {nn.InstanceNorm1d: 1, nn.InstanceNorm2d: 2, nn.InstanceNorm3d: 3}.get(type(mod), 2)
        nd = len(L.g.nodes[ref_of(x, "instance_norm input")].shape)
        return instance_norm(L, x, param("weight"), param("bias"), mod.eps, n, lead=nd - nsp)
    return NOT_MINE
