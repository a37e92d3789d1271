import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, y):
        # what torch 2.11 raises for a CUDA out-of-memory inside kiln's sandbox, where NVML may not
        # list the GPU's processes (seen on the H200, 2026-12-01)
        raise RuntimeError('NVML_SUCCESS == r INTERNAL ASSERT FAILED at "/pytorch/c10/cuda/CUDACachingAllocator.cpp"'
                           ':1165, please report a bug to PyTorch. ')
