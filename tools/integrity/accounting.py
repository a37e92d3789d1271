"""Operator accounting: every ATen operator `ModelNew.forward` dispatches, compute or not.

A `TorchDispatchMode` sees every operator that reaches the dispatcher, from Python and from C++
extensions alike (`torch::softmax` in a `load_inline` host function shows up as `aten::_softmax`).
While one of the candidate's own kernels is being launched, only the launcher's own bookkeeping is
left out: allocations, views and copies (the Triton interpreter's copies to and from the host).
Compute operators count wherever they run, so torch work hidden in a grid callable, an autotune
`pre_hook` or a launch hook is the candidate's PyTorch compute like any other. The recorder also
remembers which storages the forward allocated, so the decoy check knows what it may poison
freely, and (with a `ResultLog`) every compute result, for the laundering check.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from kiln.tools.integrity.launches import LaunchHooks
from kiln.tools.integrity.launder import ResultLog
from kiln.tools.integrity.ops import is_compute

_COPIES = frozenset({"clone", "_to_copy", "contiguous", "to"})


class AtenRecorder(TorchDispatchMode):
    def __init__(self, hooks: LaunchHooks | None = None,
                 snapshots: dict[int, tuple[str, torch.Tensor]] | None = None, log: ResultLog | None = None) -> None:
        super().__init__()
        self.hooks = hooks
        self.snapshots = snapshots  # filled inside extension functions: storage -> (op, values)
        self.log = log  # every compute result of the forward, for the laundering check
        self.counts: dict[str, int] = {}
        self.fresh: set[int] = set()  # storage pointers allocated during the forward

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        out = func(*args, **(kwargs or {}))
        name = f"aten::{func.overloadpacket.__name__}"
        compute = is_compute(name)
        if self.hooks is not None and self.hooks.depth > 0 and not compute:
            return out  # the launcher's own bookkeeping (the interpreter's copies), not the candidate's
        self.counts[name] = self.counts.get(name, 0) + 1
        self._note(name, compute, func.overloadpacket.__name__, out, args)
        return out

    def _note(self, name: str, compute: bool, base: str, out: object, args: tuple) -> None:
        keep = self.snapshots is not None and self.hooks is not None and self.hooks.ext_depth > 0 and compute
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            if not _aliases_args(t, args):
                self.fresh.add(_sid(t))
            if keep and self.snapshots is not None:
                self.snapshots[_sid(t)] = (name, t.detach().clone())
            if self.log is not None and compute:
                self.log.add(name, t)
        if self.log is not None and args and base in _COPIES:
            self.log.note_copy(out, args[0])
        elif self.log is not None and len(args) > 1 and base == "copy_":
            self.log.note_copy(args[0], args[1])

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
