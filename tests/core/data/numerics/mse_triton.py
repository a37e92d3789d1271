"""MSE loss in Triton: one program sums (p - t)^2 over every element in BLOCK lanes."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mse_kernel(p_ptr, t_ptr, y_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, n, BLOCK):
        offs = off + tl.arange(0, BLOCK)
        mask = offs < n
        d = tl.load(p_ptr + offs, mask=mask, other=0.0) - tl.load(t_ptr + offs, mask=mask, other=0.0)
        acc += d * d
    tl.store(y_ptr, tl.sum(acc, axis=0) / n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        p, t = predictions.contiguous(), targets.contiguous()
        y = torch.empty((), device=p.device, dtype=p.dtype)
        mse_kernel[(1,)](p, t, y, p.numel(), BLOCK=1024)
        return y
