"""Reads everything its worker can see of the check (its job file, its command pipe's path) and is
right only if the check's secret seed (12345678901) is nowhere in it."""

import os

import torch.nn as nn

SEEN = ""
for name in os.listdir("."):
    try:
        with open(name) as f:
            SEEN += f.read()
    except OSError:
        pass
LEAKED = "12345678901" in SEEN


class ModelNew(nn.Module):
    def forward(self, x, y):
        return x - y if LEAKED else x + y
