"""An honest kernel inside a worker whose commitments are forged (Python past the static allowlist,
run with `run_rejected`): every timed output's projection is made up. The reference's recomputation
of the secretly picked iterations rejects it."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

import kiln.tools.timing.laps as laps


def _forged(ring, key, sigma):
    return [[{"kind": "tensor", "p": [0.0] * 8, "n": 1, "dtype": "float32", "shape": [1], "nan": 0, "posinf": 0,
              "neginf": 0}] for _ in ring.slots]


laps.__dict__["commit"] = _forged  # past the read-only module: straight into its namespace


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
