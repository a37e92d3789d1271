import torch
import torch.nn as nn

batch_size = 2
seq = 9
in_features = 40
out_features = 24


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        return torch.sigmoid(self.proj(x))


def get_inputs():
    return [torch.randn(batch_size, seq, in_features)]


def get_init_inputs():
    return [in_features, out_features]
