"""Two Stable-Diffusion-style UNet ResBlocks (diffusers' ResnetBlock2D layout: GroupNorm(32) -> SiLU ->
3x3 conv, a time-embedding projection, GroupNorm -> SiLU -> 3x3 conv, residual), written here so the
benchmark runs where diffusers is not installed. 320 channels, 64x64, batch 2 by default.

    kiln model examples/model/sd_resblock.py:make --device cuda --dtype bf16
"""

import torch
import torch.nn as nn


class ResBlock(nn.Module):
    def __init__(self, ch: int = 320, temb: int = 1280, groups: int = 32) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, ch, eps=1e-6)
        self.conv1 = nn.Conv2d(ch, ch, 3, padding=1)
        self.time_emb_proj = nn.Linear(temb, ch)
        self.norm2 = nn.GroupNorm(groups, ch, eps=1e-6)
        self.conv2 = nn.Conv2d(ch, ch, 3, padding=1)
        self.nonlinearity = nn.SiLU()

    def forward(self, x, temb):
        h = self.conv1(self.nonlinearity(self.norm1(x)))
        h = h + self.time_emb_proj(self.nonlinearity(temb))[:, :, None, None]
        h = self.conv2(self.nonlinearity(self.norm2(h)))
        return x + h


class TwoBlocks(nn.Module):
    def __init__(self, ch: int = 320) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([ResBlock(ch), ResBlock(ch)])

    def forward(self, x, temb):
        for b in self.blocks:
            x = b(x, temb)
        return x


def make(ch: int = 320, size: int = 64, batch: int = 2):
    torch.manual_seed(0)
    return TwoBlocks(ch), (torch.randn(batch, ch, size, size), torch.randn(batch, 1280))


def make_small():
    """A CPU-sized version (the tests)."""
    return make(ch=32, size=8, batch=2)
