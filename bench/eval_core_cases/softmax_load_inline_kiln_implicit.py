"""load_inline candidate, kiln's first form: plain CUDA in the .cu part, torch headers only in the C++ part,
but load_inline's implicit headers left on (it prepends torch/types.h to the .cu, so nvcc still parses torch)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <cuda_runtime.h>

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

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int n_cols) {
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

void launch_softmax(const float* x, float* y, int rows, int n_cols, cudaStream_t stream) {
    softmax_rows<<<rows, THREADS, 0, stream>>>(x, y, n_cols);
}
"""

CPP_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

void launch_softmax(const float* x, float* y, int rows, int n_cols, cudaStream_t stream);

torch::Tensor softmax_fwd(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expects a float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int n_cols = xc.size(-1);
    launch_softmax(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel() / n_cols, n_cols,
                   at::cuda::getCurrentCUDAStream());
    return y;
}
"""

_ext = load_inline(name="kiln_bench_softmax_kiln_implicit", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                   functions=["softmax_fwd"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.softmax_fwd(x)
