"""Right only where its worker's environment is clean: no secret from the parent, pinned to no GPU
under the Triton interpreter, inductor without compile workers. Otherwise its output is wrong."""

import os

import torch._inductor.config as inductor_config
import torch.nn as nn

SECRETS = ("OPENAI_API_KEY", "KILN_TEST_TOKEN")
CLEAN = (not any(k in os.environ for k in SECRETS)
         and not any("sk-planted" in v for v in os.environ.values())
         and os.environ.get("TRITON_INTERPRET") == "1" and os.environ.get("CUDA_VISIBLE_DEVICES") == ""
         and str(inductor_config.compile_threads) == "1")


class ModelNew(nn.Module):
    def forward(self, x, y):
        return x + y if CLEAN else x - y
