"""A harness patched to know every lap's inputs in advance. The ring's key came with the timing
set-up, and each (lap, slot) draw used to be a function of it and of the lap's number; while the
untimed warm-up ran, this computed the outputs of the laps to come, and each timed lap handed back
outputs it already had (62 us a call against the honest 3,810 on the CPU, every audited output
right). Each lap's inputs now come from a key the worker learns only with that lap's refresh: the
foreseen outputs answer other inputs, and the audit rejects them."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

import kiln.tools.timing.laps as laps
from kiln.tools.inputs import derive_seed, inputs_from_seed

_run_lap, _refresh = laps.run_lap, laps.Ring.refresh
_ahead: dict[int, list] = {}
_now = [-2]  # the lap about to run: one untimed warm-up lap (-1), then 1, 2, ...


def _refresh_and_count(ring, *args):
    _now[0] += 2 if _now[0] == -1 else 1
    return _refresh(ring, *args)


def _foreseen(ring, lap, slot):
    """The inputs of (lap, slot) as they were drawn when a lap's draw followed from the ring's key."""
    return inputs_from_seed(ring.get_inputs, seed=derive_seed(ring.spec.key, "lap", lap, "slot", slot), dist="x1",
                            dtype=ring.spec.dtype, device=ring.spec.device)


def _foreseen_lap(fn, ring):
    if not _ahead:  # the warm-up: every lap to come, computed now
        for lap in range(1, 61):
            with torch.no_grad():
                _ahead[lap] = [fn(*_foreseen(ring, lap, i)) for i in range(len(ring.slots))]
    if _now[0] in _ahead:
        ring.outputs = _ahead[_now[0]]
        return len(ring.slots)
    return _run_lap(fn, ring)


laps.Ring.refresh = _refresh_and_count
laps.__dict__.update(run_lap=_foreseen_lap)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        add_kernel[(triton.cdiv(x.numel(), 256),)](x, y, out, x.numel(), BLOCK=256)
        return out
