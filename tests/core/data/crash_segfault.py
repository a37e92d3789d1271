import ctypes

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, y):
        ctypes.string_at(0)  # read address 0: SIGSEGV
        return x + y
