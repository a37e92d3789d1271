"""ReLU on 37 x 129 fp32 whose reference also spends 40 ms of its own CPU time on each call (a result
it then multiplies by zero): a reference with work to do, for a candidate that tries to starve it.
The work is counted in process CPU time, not in matmuls, so it costs the same on a fast machine (a
fixed 400 matmuls took 40 ms where this was written and 7 ms on a later CI machine, too little for the
starving candidate to push the check past its timeout)."""

import time

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        start = time.process_time()
        a = torch.ones(64, 64)
        while time.process_time() - start < 0.04:
            a = (a @ a) * 0.01
        return torch.relu(x) + a[0, 0] * 0


def get_inputs():
    return [torch.rand(37, 129)]


def get_init_inputs():
    return []
