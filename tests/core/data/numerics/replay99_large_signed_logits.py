"""Replay 99's Proposer case `large_signed_logits` (the problem's own Model, imported by kiln from
the problem: this file has none): 40 x 64 inputs at 50x KernelBench's scale."""

import torch

batch_size = 40
in_features = 64
out_features = 300


def get_inputs():
    return [torch.randn(batch_size, in_features) * 50.0]


def get_init_inputs():
    return [in_features, out_features]
