# kiln few-shot example -- problem: problems/scale_add.py -- lang: cuda (kiln's load_inline form)
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# kiln's load_inline form: the .cu part is plain CUDA with no torch headers (nvcc compiles it in
# about a second); the C++ part includes torch, checks and allocates, and passes raw pointers and
# the current stream to a launcher declared in the .cu part.
CUDA_SRC = r"""
#include <cuda_runtime.h>
#include <cstdint>

__global__ void scale_add_kernel(const float* __restrict__ x, const float* __restrict__ y,
                                 float* __restrict__ out, float alpha, int64_t n) {
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = alpha * x[i] + y[i];
    }
}

void scale_add_launch(const float* x, const float* y, float* out, float alpha, int64_t n,
                      cudaStream_t stream) {
    const int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 65535) blocks = 65535;  // the grid-stride loop covers the rest
    if (blocks > 0) scale_add_kernel<<<(unsigned)blocks, threads, 0, stream>>>(x, y, out, alpha, n);
}
"""

CPP_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

void scale_add_launch(const float* x, const float* y, float* out, float alpha, int64_t n,
                      cudaStream_t stream);

torch::Tensor scale_add(torch::Tensor x, torch::Tensor y, double alpha) {
    TORCH_CHECK(x.is_cuda() && y.is_cuda(), "scale_add: CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat && y.scalar_type() == torch::kFloat, "scale_add: fp32 expected");
    TORCH_CHECK(x.sizes() == y.sizes(), "scale_add: shapes differ");
    auto xc = x.contiguous();
    auto yc = y.contiguous();
    auto out = torch::empty_like(xc);
    scale_add_launch(xc.data_ptr<float>(), yc.data_ptr<float>(), out.data_ptr<float>(),
                     static_cast<float>(alpha), xc.numel(), c10::cuda::getCurrentCUDAStream());
    return out;
}
"""

_ext = None


def _extension():
    # built on first use, not at import: kiln sets TORCH_EXTENSIONS_DIR per source hash first
    global _ext
    if _ext is None:
        _ext = load_inline(
            name="kiln_example_scale_add",
            cpp_sources=CPP_SRC,
            cuda_sources=CUDA_SRC,
            functions=["scale_add"],
            extra_cuda_cflags=["-O3"],
            no_implicit_headers=True,  # keep torch headers out of the .cu part
        )
    return _ext


class ModelNew(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return _extension().scale_add(x, y, self.alpha)
