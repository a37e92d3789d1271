"""`lazy_lap.py` with one long sleep in one commit: under a charge made from the mean overhead and
its standard error, that one step widened the allowance past the whole deferred work (the charge
fell from ~4.6 ms to 0 on the CPU). Charged lap by lap, the sleep is charged to its own lap and
every other lap still carries its deferred work."""

import time

import torch
import torch.nn as nn
import triton
import triton.language as tl

import kiln.tools.timing.laps as laps

_commit = laps.commit
_commits = [0]


def _idle_lap(fn, ring):
    ring.outputs, ring.deferred = [], fn
    return len(ring.slots)


def _lazy_commit(ring, key, sigma):
    _commits[0] += 1
    if _commits[0] == 3:  # one timed commit (after the warm-up lap's), 1 s long
        time.sleep(1.0)
    ring.outputs = [ring.deferred(*slot) for slot in ring.slots]
    return _commit(ring, key, sigma)


laps.__dict__.update(run_lap=_idle_lap, commit=_lazy_commit)


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
