"""Statically rejected (it writes a file at import): must never run, so the mark never appears."""

from pathlib import Path

import torch.nn as nn

Path(__file__).with_name("MARK").write_text("ran")


class ModelNew(nn.Module):
    def forward(self, x, y):
        return x + y
