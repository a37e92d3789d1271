"""A plain CUDA kernel (extern "C", compiled by NVRTC through CuPy) launched on torch tensors."""
import cupy
import torch
import torch.nn as nn

SOURCE = r"""
extern "C" __global__ void scale_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;   // one element per thread
    if (i < n) y[i] = 2.0f * x[i] + 1.0f;
}
"""
_kernel = cupy.RawKernel(SOURCE, "scale_kernel")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        threads = 256
        _kernel(((n + threads - 1) // threads,), (threads,),
                (cupy.asarray(x), cupy.asarray(y), cupy.int64(n)))
        return y
