# kiln few-shot example -- problem: problems/pairwise_dist.py -- lang: triton
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def pairwise_dist_kernel(x_ptr, y_ptr, out_ptr, N, M, D, stride_xn, stride_xd, stride_ym, stride_yd,
                         stride_on, stride_om, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr,
                         BLOCK_D: tl.constexpr):
    # Each program owns one BLOCK_N x BLOCK_M tile of the output and walks D in BLOCK_D steps:
    # ||x - y||^2 = ||x||^2 + ||y||^2 - 2 x.y, with x.y on tl.dot and both squared norms
    # accumulated from the same loads, so x and y are each read once per tile.
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rm = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, BLOCK_D)
    dot = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    xx = tl.zeros((BLOCK_N,), dtype=tl.float32)
    yy = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for d0 in range(0, D, BLOCK_D):
        dd = d0 + rd
        # masks cover the ragged edges of N, M and D; masked lanes load 0 and add nothing
        a = tl.load(x_ptr + rn[:, None] * stride_xn + dd[None, :] * stride_xd,
                    mask=(rn[:, None] < N) & (dd[None, :] < D), other=0.0)
        # y is (M, D); read it as a D x M tile so the dot needs no transpose
        b = tl.load(y_ptr + rm[None, :] * stride_ym + dd[:, None] * stride_yd,
                    mask=(rm[None, :] < M) & (dd[:, None] < D), other=0.0)
        dot = tl.dot(a, b, dot, input_precision="ieee")  # fp32 inputs: no TF32, to match fp32 torch
        xx += tl.sum(a * a, axis=1)
        yy += tl.sum(b * b, axis=0)
    sq = tl.maximum(xx[:, None] + yy[None, :] - 2.0 * dot, 0.0)  # rounding can dip just below 0
    tl.store(out_ptr + rn[:, None] * stride_on + rm[None, :] * stride_om, tl.sqrt(sq),
             mask=(rn[:, None] < N) & (rm[None, :] < M))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        N, D = x.shape
        M = y.shape[0]
        out = torch.empty((N, M), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(N, 32), triton.cdiv(M, 32))
        pairwise_dist_kernel[grid](x, y, out, N, M, D, x.stride(0), x.stride(1), y.stride(0), y.stride(1),
                                   out.stride(0), out.stride(1), BLOCK_N=32, BLOCK_M=32, BLOCK_D=32)
        return out
