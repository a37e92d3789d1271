# kiln few-shot example -- problem: problems/code_scores.py -- lang: triton
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def code_scores_kernel(x_ptr, w_ptr, g_ptr, out_ptr, N, C, D, stride_xn, stride_xd, stride_wc, stride_wd,
                       stride_on, stride_oc, BLOCK_N: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_D: tl.constexpr,
                       GROUP_N: tl.constexpr):
    # One program per BLOCK_N x BLOCK_C output tile. Grouped tile order: programs that run together
    # take GROUP_N row tiles before moving to the next column tile, so the x and codebook tiles they
    # share are read from L2, not DRAM (a plain row-major order rereads the codebook per row tile).
    pid = tl.program_id(0)
    tiles_n, tiles_c = tl.cdiv(N, BLOCK_N), tl.cdiv(C, BLOCK_C)
    group = pid // (GROUP_N * tiles_c)
    first_n = group * GROUP_N
    rows_in_group = tl.minimum(tiles_n - first_n, GROUP_N)
    pid_n = first_n + (pid % (GROUP_N * tiles_c)) % rows_in_group
    pid_c = (pid % (GROUP_N * tiles_c)) // rows_in_group
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rc = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    rd = tl.arange(0, BLOCK_D)
    acc = tl.zeros((BLOCK_N, BLOCK_C), dtype=tl.float32)
    for d0 in range(0, D, BLOCK_D):
        dd = d0 + rd
        a = tl.load(x_ptr + rn[:, None] * stride_xn + dd[None, :] * stride_xd,
                    mask=(rn[:, None] < N) & (dd[None, :] < D), other=0.0)
        # the codebook is (C, D): read a D x C tile of its transpose straight from memory
        b = tl.load(w_ptr + rc[None, :] * stride_wc + dd[:, None] * stride_wd,
                    mask=(rc[None, :] < C) & (dd[:, None] < D), other=0.0)
        # fp32 operands on the tensor cores at fp32 accuracy: 3xTF32 splits each operand into two TF32
        # parts and sums three products (plain TF32 would miss the fp32 tolerance; "ieee" would run
        # on the FMA units at a fraction of the speed)
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
    # the epilogue runs on the accumulator in registers: no second pass over the output
    gain = tl.load(g_ptr + rc, mask=rc < C, other=0.0)
    out = tl.maximum(acc * gain[None, :], 0.0)
    tl.store(out_ptr + rn[:, None] * stride_on + rc[None, :] * stride_oc, out,
             mask=(rn[:, None] < N) & (rc[None, :] < C))


class ModelNew(nn.Module):
    def __init__(self, n_codes: int, dim: int):
        super().__init__()
        self.codebook = nn.Parameter(torch.randn(n_codes, dim) / dim**0.5)
        self.gain = nn.Parameter(torch.rand(n_codes) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        N, D = x.shape
        C = self.codebook.shape[0]
        out = torch.empty((N, C), device=x.device, dtype=x.dtype)
        # tiles from the shapes (no device test: one code path, verified wherever it runs);
        # tl.dot needs every tile dimension >= 16
        block_n = 64 if N >= 64 else max(16, triton.next_power_of_2(N))
        block_c = 64 if C >= 64 else max(16, triton.next_power_of_2(C))
        grid = (triton.cdiv(N, block_n) * triton.cdiv(C, block_c),)
        code_scores_kernel[grid](x, self.codebook, self.gain, out, N, C, D, x.stride(0), x.stride(1),
                                 self.codebook.stride(0), self.codebook.stride(1), out.stride(0), out.stride(1),
                                 BLOCK_N=block_n, BLOCK_C=block_c, BLOCK_D=32, GROUP_N=8, num_warps=4, num_stages=3)
        return out
