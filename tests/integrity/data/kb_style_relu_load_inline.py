"""An honest KernelBench-style load_inline candidate (as LLMs write them): no static rejections."""

import os
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"

cuda_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_kernel(const float* x, float* out, int size) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int half = size / 2;  // a variable named half is not a downcast
    if (idx < size) out[idx] = fmaxf(x[idx], 0.f) + 0 * half;
}

torch::Tensor relu_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be CUDA");
    auto size = x.numel();
    auto out = torch::zeros_like(x);
    const int block_size = 256;
    const int num_blocks = (size + block_size - 1) / block_size;
    relu_kernel<<<num_blocks, block_size, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), size);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""
cpp_source = "torch::Tensor relu_cuda(torch::Tensor x);"
relu = load_inline(name="relu", cpp_sources=cpp_source, cuda_sources=cuda_source, functions=["relu_cuda"],
                   verbose=False, extra_cflags=["-O3"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super(ModelNew, self).__init__()
        self.relu = relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch.cuda.synchronize()
        return self.relu.relu_cuda(x.contiguous())


def get_inputs():
    return [torch.rand(16, 16384).cuda()]
