"""The physics floor: no kernel moves its bytes faster than the memory system or does its FLOPs
faster than the tensor cores.

`count_work` runs the reference once (in the reference process) and counts:
- bytes that must move: every input or parameter storage the forward actually *reads* (only the
  parts read through views, so `x[:, :10]` counts a tenth of `x`), once, plus every output once;
- FLOPs, where `torch.utils.flop_counter` can count them (matmul, conv, attention), else None.

`kiln.tools.integrity.floor` turns those into the fastest possible time on a GPU with its measured peaks, with a
safety margin (`BW_MARGIN`, `COMPUTE_MARGIN`) because a read-only kernel can beat the copy
benchmark's bandwidth a little and clocks vary.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from kiln.tools.integrity.floor import BW_MARGIN, COMPUTE_MARGIN, floor
from kiln.tools.integrity.ops import METADATA, VIEW, base_name

__all__ = ["BW_MARGIN", "COMPUTE_MARGIN", "count_work", "floor"]


_NO_ACCESS = VIEW | METADATA


class _ReadTracker(TorchDispatchMode):
    """Records which parts of the watched storages non-view operators read."""

    def __init__(self, watched: set[int]) -> None:
        super().__init__()
        self.watched = watched
        self.reads: dict[int, set[tuple]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        kwargs = kwargs or {}
        if base_name(str(func.overloadpacket.__name__)) not in _NO_ACCESS:
            for t in tree_flatten((args, kwargs))[0]:
                if isinstance(t, torch.Tensor) and _storage_id(t) in self.watched:
                    view = (t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.element_size())
                    self.reads.setdefault(_storage_id(t), set()).add(view)
        return func(*args, **kwargs)


def count_work(model: nn.Module, inputs: tuple) -> tuple[int, int | None]:
    """(bytes that must move, FLOPs or None) for one forward of `model` on `inputs`."""
    from torch.utils.flop_counter import FlopCounterMode

    sources = [t for t in _tensors(inputs)] + list(model.parameters()) + list(model.buffers())
    sizes = {_storage_id(t): t.untyped_storage().nbytes() for t in sources}
    tracker = _ReadTracker(set(sizes))
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter, tracker:
        out = model(*inputs)
    read = sum(_bytes_read(views, sizes[sid]) for sid, views in tracker.reads.items())
    written = _output_bytes(out, set(sizes))
    flops = int(counter.get_total_flops())
    return read + written, (flops or None)


def _bytes_read(views: set[tuple], storage_bytes: int) -> int:
    return min(storage_bytes, sum(_numel(shape) * size for _, shape, _, size in views))


def _output_bytes(out: Any, sources: set[int]) -> int:
    seen: dict[int, int] = {}
    for t in _tensors(out):
        sid = _storage_id(t)
        if sid not in sources:
            seen[sid] = max(seen.get(sid, 0), t.numel() * t.element_size())
    return sum(seen.values())


def _tensors(obj: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(obj)[0] if isinstance(t, torch.Tensor)]


def _storage_id(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _numel(shape: tuple) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n
