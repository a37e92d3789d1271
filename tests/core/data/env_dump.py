"""Writes the worker's environment next to this file, then computes the right answer."""

import json
import os
from pathlib import Path

import torch._inductor.config as inductor_config
import torch.nn as nn

seen = dict(os.environ, _inductor_compile_threads=str(inductor_config.compile_threads))
Path(__file__).with_suffix(".env.json").write_text(json.dumps(seen))


class ModelNew(nn.Module):
    def forward(self, x, y):
        return x + y
