"""RED TEAM, class 8 (laundering PyTorch's result through a copy kernel): forward calls
`torch.relu` and copies its result into the output with a Triton kernel. The copy is an own kernel
that ran and feeds the output (poisoning it moves the result), and the `partial` policy allows
PyTorch operators for "parts", so the whole computation passes as the candidate's own.
Today: `ok` under partial. Stopped by a runtime rule that an own kernel which only moves a PyTorch
operator's output unchanged does no work (`runtime.decoy` / `runtime.no-own-kernel`)."""
# ruff: noqa: F821 - copy_out comes from parts/copy_kernel.py (# <include>)

import torch
import torch.nn as nn

# <include copy_kernel>


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return copy_out(torch.relu(x), x)
