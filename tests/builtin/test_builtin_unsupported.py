"""Problems outside the template library end with a clear `unsupported` error, never a kernel."""

from __future__ import annotations

import pytest

from kiln.agents.base import CoderTask
from kiln.agents.builtin import BuiltinCoder

TEMPLATE = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}
    def forward(self, x):
        return {expr}


def get_inputs():
    return [torch.randn(4, 3, 8, 8)]


def get_init_inputs():
    return []
"""

CASES = {
    "conv_reflect": ("        self.conv = nn.Conv2d(3, 4, 3, padding=1, padding_mode='reflect')\n", "self.conv(x)",
                     "padding_mode='reflect'"),
    "sort": ("", "torch.sort(x, dim=1)[0]", "op `sort`"),
    "argmax_arithmetic": ("", "torch.argmax(x, dim=1) * 2", "an op on argmax's int64 indices"),
    "cummax": ("", "torch.cummax(x, dim=1)[0]", "op `cummax`"),
    "two_outputs": ("", "x.relu(), x.sigmoid()", "several values"),
    "permute": ("", "x.permute(0, 2, 3, 1).relu()", "tensor method `.permute`"),
    "odd_pow": ("", "x ** 2.5", "exponent 2.5"),
    "two_reduce_dims": ("", "x.sum(dim=(1, 3))", "non-adjacent dims"),
    "dropout": ("        self.drop = nn.Dropout(0.5)\n", "self.drop(x)", "dropout with p > 0 in training mode"),
    "pool_indices": ("", "F.max_pool2d(x, 2, return_indices=True)[0]", "return_indices=True"),
    "masked_attention": ("", "F.scaled_dot_product_attention(x, x, x, attn_mask=x)", "with a mask"),
    "size_as_value": ("", "x / x.shape[-1]", "a tensor size used as a number"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_unsupported_ops_get_a_clear_error(name: str) -> None:
    init, expr, what = CASES[name]
    src = TEMPLATE.format(init=init, expr=expr)
    reply = BuiltinCoder().write(CoderTask(mode="generate", problem_name=name, problem_src=src))
    assert not reply.ok and reply.source is None
    assert reply.error is not None and reply.error.startswith("unsupported by the built-in coder: ")
    assert what in reply.error


def test_cuda_is_not_written(examples) -> None:
    src = (examples / "softmax.py").read_text()
    reply = BuiltinCoder().write(CoderTask(mode="generate", lang="cuda", problem_name="softmax", problem_src=src))
    assert not reply.ok and "--lang cuda" in (reply.error or "")


def test_a_broken_problem_is_unsupported_not_a_crash() -> None:
    reply = BuiltinCoder().write(CoderTask(mode="generate", problem_name="broken", problem_src="import torch\n"))
    assert not reply.ok and "defines no `Model`" in (reply.error or "")
