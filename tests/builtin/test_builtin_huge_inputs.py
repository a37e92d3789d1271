"""The built-in Coder and Proposer read input shapes without drawing the inputs: KernelBench's
level-1 tensors are multi-GB, and drawing them on the CPU made one-shot generation take over a
minute per problem in a batch on the H200 (8 problems generating at once)."""

from __future__ import annotations

import time

from kiln.agents.base import CoderTask, GpuFacts
from kiln.agents.builtin.coder import BuiltinCoder
from kiln.agents.builtin.problem import load_problem_src, meta_inputs
from kiln.agents.builtin.proposer import BuiltinProposer

# 2**40 fp32 elements (4 TiB): no machine draws this, so only shapes can have been read.
HUGE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.mean(x, dim=self.dim)


def get_inputs():
    return [torch.rand(1 << 20, 1 << 20)]


def get_init_inputs():
    return [1]
'''


def test_coder_writes_a_kernel_for_inputs_no_machine_can_hold() -> None:
    t0 = time.monotonic()
    reply = BuiltinCoder().write(CoderTask(mode="generate", problem_name="huge_mean", problem_src=HUGE,
                                           gpu=GpuFacts(device="cuda")))
    assert reply.ok and reply.source and "ModelNew" in reply.source, reply.error
    assert time.monotonic() - t0 < 30


def test_proposer_sizes_come_from_meta_tensors() -> None:
    (x,) = meta_inputs(load_problem_src(HUGE))
    assert x.is_meta and tuple(x.shape) == (1 << 20, 1 << 20)
    assert BuiltinProposer()._numel(HUGE) == 1 << 40  # None if it had tried to draw the 4 TiB input
