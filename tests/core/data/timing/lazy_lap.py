"""An honest kernel inside a worker whose timing harness has been patched (Python past the static
allowlist: the check runs it with `run_rejected`): the lap returns at once without computing, and
the outputs are computed only when the parent asks for their commitment. kiln's clock charges the
commit's extra time to the lap, so it is not faster than honest."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

import kiln.tools.timing.laps as laps

_commit = laps.commit


def _idle_lap(fn, ring):
    ring.outputs, ring.deferred = [], fn
    return len(ring.slots)


def _lazy_commit(ring, key, sigma):
    ring.outputs = [ring.deferred(*slot) for slot in ring.slots]  # the lap's work, done now
    return _commit(ring, key, sigma)


laps.__dict__.update(run_lap=_idle_lap, commit=_lazy_commit)  # past the read-only module


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
