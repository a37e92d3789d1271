"""Fast-path CUDA candidate (kiln.tools.cuda): one 512-thread block per row, warp-shuffle reductions."""

import torch
import torch.nn as nn

from kiln.tools.cuda import CudaKernel

SRC = r"""
#define THREADS 512

// Reduce within each warp with shuffles, then across the 16 warps through shared memory.
__device__ float block_reduce(float v, float* smem, bool is_max) {
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, w) : v + w;
    }
    if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = v;
    __syncthreads();
    v = smem[threadIdx.x & 15];
    for (int o = 8; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, w) : v + w;
    }
    __syncthreads();  // smem is reused by the next reduction
    return v;
}

extern "C" __global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int n_cols) {
    __shared__ float smem[32];
    const float* xr = x + (long long)blockIdx.x * n_cols;
    float* yr = y + (long long)blockIdx.x * n_cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < n_cols; c += THREADS) m = fmaxf(m, xr[c]);
    m = block_reduce(m, smem, true);
    float s = 0.0f;
    for (int c = threadIdx.x; c < n_cols; c += THREADS) s += __expf(xr[c] - m);
    s = block_reduce(s, smem, false);
    float inv = 1.0f / s;
    for (int c = threadIdx.x; c < n_cols; c += THREADS) yr[c] = __expf(xr[c] - m) * inv;
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernel = CudaKernel(SRC, "softmax_rows")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n_cols = x.shape[-1]
        self.kernel.launch((x.numel() // n_cols,), (512,), [x, y, n_cols])
        return y
