"""Losses with non-default arguments: smooth L1 (beta 0.5, sum), Huber (delta 2, no reduction, then a
mean), KL with a log target, MSE and L1; the KL target holds exact zeros (0 log 0 is 0, as in torch)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.huber = nn.HuberLoss(reduction="none", delta=2.0)

    def forward(self, a, b, t):
        s = F.smooth_l1_loss(a, b, beta=0.5, reduction="sum")
        h = self.huber(a, b).mean()
        k = F.kl_div(a, t, reduction="sum") + F.kl_div(a, b, reduction="mean", log_target=True)
        return s + h + k + F.mse_loss(a, b) + F.l1_loss(a, b, reduction="sum")


def get_inputs():
    t = torch.rand(5, 64)
    t[:, ::3] = 0.0
    return [torch.randn(5, 64) * 3, torch.randn(5, 64), t]


def get_init_inputs():
    return []
