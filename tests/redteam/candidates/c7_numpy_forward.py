"""RED TEAM, class 7 (the work done where the accounting does not look: numpy): forward computes
ReLU in numpy (no ATen operator is dispatched, so the operator accounting sees nothing) and then
copies the result out with a Triton kernel, which counts as the candidate's own, feeding the
output. Passes the `strict` policy (no PyTorch compute at all).
Today: `ok` under strict. Stopped by the allowlist (numpy is not a kernel language) or a runtime
rule that an own kernel which only copies is no kernel of its own."""
# ruff: noqa: F821 - copy_out comes from parts/copy_kernel.py (# <include>)

import numpy as np
import torch
import torch.nn as nn

# <include copy_kernel>


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        host = np.maximum(x.detach().cpu().contiguous().numpy(), 0.0)
        return copy_out(torch.from_numpy(host).to(x.device), x)
