"""Extra case for add_problem.py: another shape (2 x 517), values around -5."""

import torch


def get_inputs():
    return [torch.randn(2, 517) - 5, torch.randn(2, 517)]


def get_init_inputs():
    return []
