# kiln few-shot example -- problem: problems/fake_quant.py -- lang: cuda (kiln fast path)
import torch
import torch.nn as nn

from kiln.tools.cuda import CudaKernel, i64

# Plain extern "C" CUDA: compiled by NVRTC in well under a second, no torch headers, no build step.
CUDA_SRC = r"""
extern "C" __global__ void fake_quant_f32(const float* __restrict__ x, float* __restrict__ y, float scale,
                                          float levels, long long n) {
    // grid-stride loop: a capped grid covers any n; 64-bit indices are safe past 2^31 elements
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        // x / scale, not x * (1 / scale): the reference divides, and the two round differently
        float q = rintf(x[i] / scale);  // round half to even, as torch.round
        q = fminf(fmaxf(q, -levels), levels);
        y[i] = q * scale;
    }
}
"""

_fake_quant = CudaKernel(CUDA_SRC, "fake_quant_f32")  # compiled lazily, on the first launch


class ModelNew(nn.Module):
    def __init__(self, scale: float, levels: int):
        super().__init__()
        self.scale = scale
        self.levels = levels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()  # the kernel indexes a flat, dense buffer
        y = torch.empty_like(x)
        n = x.numel()
        threads = 256
        blocks = min((n + threads - 1) // threads, 65535)
        # tensors pass as device pointers, Python floats as 32-bit floats, i64(n) as a 64-bit int;
        # launched on the current stream
        _fake_quant.launch(grid=(blocks,), block=(threads,),
                           args=(x, y, float(self.scale), float(self.levels), i64(n)))
        return y
