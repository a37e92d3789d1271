"""The fused-pair mechanism of the patch runtime, in this process, with kernels written in torch (the
runtime treats them like any ModelNew): the tail gets one fused call, in-place tails keep aliases
right, a placeholder read early is filled with the head's real result, metadata reads wait."""

from __future__ import annotations

import types

import torch
import torch.nn as nn
import torch.nn.functional as F

from kiln.evals.model import profile
from kiln.evals.model.apply import apply_entries
from kiln.evals.model.patch import Kernel, Site
from kiln.evals.model.records import BundleEntry


class FusedBnRelu(nn.Module):
    """A 'kernel' for relu(batch_norm(x)), parameters in the extracted problem's order."""

    def __init__(self, w0, w1, w2, w3):
        super().__init__()
        self.stats = (w0, w1, w2, w3)
        self.calls = 0

    def forward(self, x):
        FusedBnRelu.calls += 1
        return F.relu(F.batch_norm(x, *self.stats[:2], self.stats[2], self.stats[3], False, 0.1, 1e-5)) * 1.0


class Net(nn.Module):
    def __init__(self, inplace: bool, peek: str | None = None):
        super().__init__()
        self.bn = nn.BatchNorm2d(4)
        self.act = nn.ReLU(inplace=inplace)
        self.inplace, self.peek = inplace, peek

    def forward(self, x):
        h = self.bn(x)
        if self.peek == "shape":
            _ = h.shape[1] + h.size(0)  # metadata only
        if self.peek == "read":
            x = x + h.mean()  # a real read of the head's output before the tail
        y = self.act(h)
        if self.inplace:
            return y * 2 + h  # `h` is read again after the tail: an alias of y
        return y * 2


def _patched(net: Net, peek: str | None = None) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Profile `net`, patch the fused pair, then run it (with `peek` set only now: a call the profile
    never saw)."""
    net.eval()
    x = torch.randn(2, 4, 5, 5)
    with torch.no_grad():
        net.bn.running_mean.normal_()
        net.bn.running_var.uniform_(0.5, 2.0)
    prof = profile.profile_model(net, [lambda: net(x)], "cpu", "float32")
    net.peek = peek
    with torch.no_grad():
        want = net(x)
    g = next(g for g in prof.groups if g.kind == "fused" and g.sig.op == "F.batch_norm")
    entry = BundleEntry(group=g.id, kind="fused", sig=g.sig, tail=g.tail, kernel="", scopes=g.scopes)
    FusedBnRelu.calls = 0
    site = Site(entry, Kernel(types.SimpleNamespace(ModelNew=FusedBnRelu), g.tail.out, "test_fused_bn_relu"))
    with torch.no_grad(), apply_entries(net, [site], compile_kernels=False):
        got = net(x)
    return want, got, FusedBnRelu.calls


def test_in_place_tail_fuses_and_keeps_aliases() -> None:
    want, got, calls = _patched(Net(inplace=True))
    assert calls == 1 and torch.allclose(want, got)


def test_out_of_place_tail_fuses() -> None:
    want, got, calls = _patched(Net(inplace=False))
    assert calls == 1 and torch.allclose(want, got)


def test_metadata_reads_do_not_break_the_fusion() -> None:
    want, got, calls = _patched(Net(inplace=True), peek="shape")
    assert calls == 1 and torch.allclose(want, got)


def test_an_early_reader_gets_the_real_head() -> None:
    want, got, calls = _patched(Net(inplace=False), peek="read")
    assert calls == 0 and torch.allclose(want, got)  # filled with the real batch_norm, then unfused
