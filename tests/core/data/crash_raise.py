import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, y):
        raise ValueError("kernel launch parameters are wrong")
