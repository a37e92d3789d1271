"""RED TEAM, class 7 (the work done where the accounting does not look: numpy): forward computes
ReLU in numpy (no ATen operator is dispatched, so the operator accounting sees nothing) and then
copies the result out with a Triton kernel, which counts as the candidate's own, feeding the
output. Passes the `strict` policy (no PyTorch compute at all).
Today: `ok` under strict. Stopped by the allowlist (numpy is not a kernel language) or a runtime
rule that an own kernel which only copies is no kernel of its own."""

import numpy as np
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
        host = np.maximum(x.detach().cpu().contiguous().numpy(), 0.0)
        src = torch.from_numpy(host).to(x.device)
        out = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](src, out, x.numel(), BLOCK=1024)
        return out
