"""Stock torch.nn leaf modules whose forward is one functional call: the call, rebuilt from the module's
attributes, so a patch takes it at the module with no TorchFunctionMode around it.

Each builder gives the arguments exactly as a TorchFunctionMode sees them once `sigs.normalize` has
made keywords positional (`nn.GroupNorm.forward` calls `F.group_norm(x, G, w, b, eps)`; its
`handle_torch_function` passes `weight=`, `bias=`, `eps=`, which normalize puts back in place), so
the recorded signatures and guards are the same on both paths (tests/model/test_model_narrow.py
checks every entry against a recorded call). A builder runs on every patched call, so it reads a
module's weight and bias from its `_parameters` (where `nn.Module.__setattr__` keeps them; `m.weight`
is a `__getattr__` miss that formats an AttributeError first, a quarter of a patched pair's host
instructions before); a subclass that defines `weight` or `bias` itself is not taken as stock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.nn as nn
import torch.nn.functional as F

Build = Callable[[Any, Any], tuple]


def _group_norm(m: Any, x: Any) -> tuple:
    p = m._parameters
    try:
        return x, m.num_groups, p["weight"], p["bias"], m.eps
    except KeyError:  # not where nn.Module keeps them: read as the stock forward reads them
        return x, m.num_groups, m.weight, m.bias, m.eps


def _layer_norm(m: Any, x: Any) -> tuple:
    p = m._parameters
    try:
        return x, m.normalized_shape, p["weight"], p["bias"], m.eps
    except KeyError:
        return x, m.normalized_shape, m.weight, m.bias, m.eps


CALLS: dict[type[nn.Module], tuple[Callable, Build]] = {
    nn.GroupNorm: (F.group_norm, _group_norm),
    nn.LayerNorm: (F.layer_norm, _layer_norm),
    nn.SiLU: (F.silu, lambda m, x: (x, m.inplace)),
    nn.ReLU: (F.relu, lambda m, x: (x, m.inplace)),
}


def stock_call(mod: nn.Module) -> tuple[Callable, Build] | None:
    """(the functional, the argument builder) when `mod`'s forward is a stock one listed here (a
    subclass that keeps the stock forward counts; one that overrides it or defines `weight` or `bias`,
    or an instance whose forward was replaced, does not)."""
    if "forward" in mod.__dict__:
        return None
    for base, call in CALLS.items():
        if isinstance(mod, base) and type(mod).forward is base.forward:
            return None if hasattr(type(mod), "weight") or hasattr(type(mod), "bias") else call
    return None
