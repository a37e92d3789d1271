"""Operator accounting: every ATen operator `ModelNew.forward` dispatches, compute or not.

A `TorchDispatchMode` sees every operator that reaches the dispatcher, from Python and from C++
extensions alike (`torch::softmax` in a `load_inline` host function shows up as `aten::_softmax`).
Operators dispatched while one of the candidate's own kernels is being launched (the launcher's
own bookkeeping, the Triton interpreter's copies) are left out. The recorder also remembers
which storages the forward allocated, so the decoy check knows what it may poison freely.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from kiln.tools.integrity.launches import LaunchHooks
from kiln.tools.integrity.ops import is_compute


class AtenRecorder(TorchDispatchMode):
    def __init__(self, hooks: LaunchHooks | None = None,
                 snapshots: dict[int, tuple[str, torch.Tensor]] | None = None) -> None:
        super().__init__()
        self.hooks = hooks
        self.snapshots = snapshots  # filled inside extension functions: storage -> (op, values)
        self.counts: dict[str, int] = {}
        self.fresh: set[int] = set()  # storage pointers allocated during the forward

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        out = func(*args, **(kwargs or {}))
        if self.hooks is not None and self.hooks.depth > 0:
            return out
        name = f"aten::{func.overloadpacket.__name__}"
        self.counts[name] = self.counts.get(name, 0) + 1
        keep = self.snapshots is not None and self.hooks is not None and self.hooks.ext_depth > 0 and is_compute(name)
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and not _aliases_args(t, args):
                self.fresh.add(_sid(t))
            if keep and isinstance(t, torch.Tensor) and self.snapshots is not None:
                self.snapshots[_sid(t)] = (name, t.detach().clone())
        return out

    @property
    def compute_ops(self) -> list[str]:
        return sorted(op for op in self.counts if is_compute(op))


def _aliases_args(t: torch.Tensor, args: Any) -> bool:
    sid = _sid(t)
    return any(isinstance(a, torch.Tensor) and _sid(a) == sid for a in tree_flatten(args)[0])


def _sid(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return id(t)
