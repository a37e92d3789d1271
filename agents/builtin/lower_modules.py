"""nn.Module calls (nn.Linear, nn.LayerNorm, activations, ...) lowered like their functional forms;
parameters are read as `self.<path>.weight`, which ModelNew owns because it runs Model's __init__."""

from __future__ import annotations

from typing import Any

import torch.fx
import torch.nn as nn

from kiln.agents.builtin.lower_types import Lowering, Ref
from kiln.agents.builtin.problem import Unsupported

ACTIVATIONS: dict[type, tuple[str, dict[str, str]]] = {
    nn.ReLU: ("relu", {}), nn.Sigmoid: ("sigmoid", {}), nn.Tanh: ("tanh", {}), nn.SiLU: ("silu", {}),
    nn.Mish: ("mish", {}), nn.Softsign: ("softsign", {}), nn.SELU: ("selu", {}),
    nn.Hardsigmoid: ("hardsigmoid", {}), nn.Hardswish: ("hardswish", {}), nn.ReLU6: ("relu6", {}),
    nn.GELU: ("gelu", {"approximate": "approximate"}),
    nn.LeakyReLU: ("leaky_relu", {"negative_slope": "negative_slope"}),
    nn.ELU: ("elu", {"alpha": "alpha"}),
    nn.Softplus: ("softplus", {"beta": "beta", "threshold": "threshold"}),
    nn.Hardtanh: ("hardtanh", {"min_val": "min_val", "max_val": "max_val"}),
    nn.Identity: ("identity", {}),
}  # fmt: skip


def _param(L: Lowering, mod: nn.Module, path: str, name: str) -> Any:
    t = getattr(mod, name, None)
    return None if t is None else Ref(L.g.load(f"self.{path}.{name}", tuple(t.shape)))


def lower_module(L: Lowering, mod: nn.Module, path: str, args: list[Any], kwargs: dict[str, Any], n: torch.fx.Node) -> Any:
    if kwargs or len(args) != 1:
        raise Unsupported(f"module `{type(mod).__name__}` called with {len(args)} arguments")
    x = args[0]
    for cls, (name, attrs) in ACTIVATIONS.items():
        if type(mod) is cls:
            bound = {"input": x} | {k: getattr(mod, a) for k, a in attrs.items()}
            return L._k_unary(name, bound, n)
    if isinstance(mod, nn.Dropout) and (mod.p == 0.0 or not mod.training):
        return x
    if isinstance(mod, nn.Softmax | nn.LogSoftmax):
        name = "softmax" if isinstance(mod, nn.Softmax) else "log_softmax"
        return L._k_row(name, {"input": x, "dim": mod.dim, "dtype": None}, n)
    if isinstance(mod, nn.LayerNorm):
        b = {"input": x, "normalized_shape": mod.normalized_shape, "eps": mod.eps}
        b |= {"weight": _param(L, mod, path, "weight"), "bias": _param(L, mod, path, "bias")}
        return L._k_row("layer_norm", b, n)
    if type(mod).__name__ == "RMSNorm":
        b = {"input": x, "normalized_shape": mod.normalized_shape, "eps": getattr(mod, "eps", None)}
        return L._k_row("rms_norm", b | {"weight": _param(L, mod, path, "weight")}, n)
    if isinstance(mod, nn.GroupNorm):
        b = {"input": x, "num_groups": mod.num_groups, "eps": mod.eps}
        return L._k_gnorm("group_norm", b | {"weight": _param(L, mod, path, "weight"), "bias": _param(L, mod, path, "bias")}, n)
    if isinstance(mod, nn.AdaptiveAvgPool2d):
        return L._k_pool("adaptive_avg_pool2d", {"input": x, "output_size": mod.output_size}, n)
    if isinstance(mod, nn.Linear):
        b = {"input": x, "weight": _param(L, mod, path, "weight"), "bias": _param(L, mod, path, "bias")}
        return L._k_matmul("linear", b, n)
    from kiln.agents.builtin.lower_extra import extra_module

    return extra_module(L, mod, path, x, n)  # conv, pooling, batch/instance norm (lower_extra); raises if not covered
