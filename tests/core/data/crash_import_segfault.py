import ctypes

import torch.nn as nn

ctypes.string_at(0)  # crashes while the candidate is imported (compile stage)


class ModelNew(nn.Module):
    def forward(self, x, y):
        return x + y
