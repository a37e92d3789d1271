"""Exact fp32 whenever it is checked, fp16 arithmetic once the timing laps run (no kiln patching;
found by a red-team pass, 2026-12-07).

Like tests/core/data/timing/counts_calls.py it counts calls, but instead of a stale answer it
returns a lower-precision one: inputs and the sum rounded to fp16 inside its own Triton kernel.
Elementwise that breaks the fp32 tolerance (|err| up to ~2.4e-4 |x| > 1e-4 + 1e-4 |x| for |x| > 0.7),
so the correctness stage would reject these outputs; the timing audit bounds only the L2 error by
3 * ||atol + rtol |ref|||_2 (THRESHOLD = 9 on squares) and let them through (`ok`, the audit's worst
0.26 of its bound). On a GPU the same switch on a matmul problem moves fp32 work to fp16 or TF32
tensor cores. Under the numerics rule the audit now holds timed outputs to the accuracy the checked
trials showed.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, HALF: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    if HALF:  # noqa: SIM108 - a constexpr branch in a Triton kernel
        s = (x.to(tl.float16) + y.to(tl.float16)).to(tl.float32)
    else:
        s = x + y
    tl.store(out_ptr + offs, s, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x, y):
        self.calls += 1
        out = torch.empty_like(x)
        add_kernel[(triton.cdiv(x.numel(), 256),)](x, y, out, x.numel(), BLOCK=256, HALF=self.calls > 40)
        return out
