"""RED TEAM, class 8 (laundering PyTorch's result through a copy kernel): forward calls
`torch.relu` and copies its result into the output with a Triton kernel. The copy is an own kernel
that ran and feeds the output (poisoning it moves the result), and the `partial` policy allows
PyTorch operators for "parts", so the whole computation passes as the candidate's own.
Today: `ok` under partial. Stopped by a runtime rule that an own kernel which only moves a PyTorch
operator's output unchanged does no work (`runtime.decoy` / `runtime.no-own-kernel`)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(x)
        out = torch.empty_like(y)
        copy_kernel[(triton.cdiv(y.numel(), 1024),)](y.contiguous(), out, y.numel(), BLOCK=1024)
        return out
