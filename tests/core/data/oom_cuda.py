import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, y):
        # more than any GPU holds: the caching allocator's out-of-memory path, inside kiln's sandbox
        return x + y + torch.empty(1 << 46, dtype=torch.uint8, device=x.device)[:1].float()
