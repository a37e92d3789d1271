"""Laundering and hidden PyTorch compute, under the Triton interpreter: copy kernels that carry
PyTorch's (or Python's) result into the output are caught; honest partial-policy candidates pass."""

from __future__ import annotations

import torch

from kiln.tools.integrity.runtime import inspect_forward

X = (torch.randn(1000),)
XPOS = (torch.rand(1000),)  # KernelBench-style inputs: uniform [0, 1), where ReLU is the identity

COPY = """
@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def copy(src, dst=None):
    dst = torch.empty_like(src) if dst is None else dst
    copy_kernel[(triton.cdiv(src.numel(), 256),)](src, dst, src.numel(), BLOCK=256)
    return dst


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0 + 1.0, mask=mask)
"""


def run(load_candidate, body: str, policy: str = "partial", inputs: tuple = X):  # noqa: ANN001, ANN201
    mod = load_candidate(COPY + body)
    acc, findings = inspect_forward(mod.ModelNew(), inputs, policy=policy, device="cpu")
    return acc, {f.rule: f.severity for f in findings}, findings


def test_copying_pytorchs_result_is_laundering(load_candidate) -> None:  # noqa: ANN001
    acc, rules, findings = run(load_candidate, """
class ModelNew(nn.Module):
    def forward(self, x):
        return copy(torch.softmax(x, 0))
""")
    assert acc.copy_kernels == ["copy_kernel"] and acc.decoy_kernels == []
    assert rules["runtime.launder"] == "reject"
    ev = next(f.evidence for f in findings if f.rule == "runtime.launder")
    assert "copy_kernel" in ev and "aten::_softmax" in ev


def test_copying_an_input_pytorch_then_computes_on_is_laundering(load_candidate) -> None:  # noqa: ANN001
    _, rules, _ = run(load_candidate, """
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(copy(x), 0)
""")
    assert rules["runtime.launder"] == "reject"


def test_a_real_kernel_next_to_pytorch_is_honest_partial(load_candidate) -> None:  # noqa: ANN001
    acc, rules, _ = run(load_candidate, """
class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return torch.softmax(y, 0)
""")
    assert acc.copy_kernels == [] and rules == {"runtime.torch-compute": "info"}


def test_relu_that_is_the_identity_on_these_inputs_is_not_a_copy(load_candidate) -> None:  # noqa: ANN001
    # On non-negative inputs the ReLU kernel's output equals its input bit for bit; on the negated
    # inputs it computes, so it is let go.
    acc, rules, _ = run(load_candidate, """
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(relu(x), 0)
""", inputs=XPOS)
    assert acc.copy_kernels == [] and "runtime.launder" not in rules


def test_copying_the_candidates_own_result_is_fine(load_candidate) -> None:  # noqa: ANN001
    acc, rules, _ = run(load_candidate, """
class ModelNew(nn.Module):
    def forward(self, x):
        h = torch.sigmoid(x)
        return copy(relu(h - 0.5))
""")
    assert acc.copy_kernels == [] and "runtime.launder" not in rules


def test_pure_data_movement_without_pytorch_compute_is_fine(load_candidate) -> None:  # noqa: ANN001
    acc, rules, _ = run(load_candidate, """
class ModelNew(nn.Module):
    def forward(self, x):
        return copy(x)
""", policy="strict")
    assert acc.copy_kernels == [] and rules == {}


def test_a_real_launch_does_not_hide_a_copy_that_writes_the_output(load_candidate) -> None:  # noqa: ANN001
    _, rules, _ = run(load_candidate, """
class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)  # a real launch ...
        return copy(torch.softmax(y, 0)).clone()   # ... but the answer is torch's, moved by a copy
""")
    assert rules["runtime.launder"] == "reject"


def test_python_computed_result_copied_by_a_kernel_is_laundering(load_candidate) -> None:  # noqa: ANN001
    _, rules, findings = run(load_candidate, """
class ModelNew(nn.Module):
    def forward(self, x):
        vals = [max(v, 0.0) * 2.0 for v in x.tolist()]   # the work, in Python
        return copy(torch.tensor(vals, dtype=x.dtype))
""")
    assert rules["runtime.launder"] == "reject"
    assert "outside PyTorch" in next(f.evidence for f in findings if f.rule == "runtime.launder")


def test_copy_nudged_below_the_tolerance_is_still_a_copy(load_candidate) -> None:  # noqa: ANN001
    _, rules, _ = run(load_candidate, """
@triton.jit
def nudge_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask) * 1.000001, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.softmax(x, 0)
        out = torch.empty_like(y)
        nudge_kernel[(triton.cdiv(y.numel(), 256),)](y, out, y.numel(), BLOCK=256)
        return out
""")
    assert rules["runtime.launder"] == "reject"


def test_pytorch_compute_inside_a_grid_callable_is_counted(load_candidate) -> None:  # noqa: ANN001
    # The grid callable runs inside the launch: its torch work used to be left out with the
    # interpreter's copies. It is the candidate's compute, and here the kernel only copies it.
    acc, rules, _ = run(load_candidate, """
class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        scratch = torch.empty_like(x)

        def grid(meta):
            scratch.copy_(torch.softmax(x, 0))
            return (triton.cdiv(x.numel(), meta["BLOCK"]),)

        copy_kernel[grid](scratch, out, x.numel(), BLOCK=256)
        return out
""", policy="strict")
    assert "aten::_softmax" in acc.compute_ops
    assert rules["runtime.torch-compute"] == "reject" and rules["runtime.launder"] == "reject"


def test_extension_returning_a_copy_of_a_pytorch_result_is_laundering(load_candidate) -> None:  # noqa: ANN001
    _, rules, _ = run(load_candidate, """
import types

ext = types.ModuleType("kiln_test_ext_copy")
ext.__file__ = "/tmp/kiln_test_ext_copy/kiln_test_ext_copy.so"


def _host(x):
    y = torch.softmax(x, 0)
    return copy(y)   # an own kernel moves PyTorch's answer into a fresh buffer


ext.softmax_fwd = _host


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.softmax_fwd(x)
""")
    assert rules["runtime.launder"] == "reject"


def test_a_contiguous_copy_of_an_input_is_still_the_input(load_candidate) -> None:  # noqa: ANN001
    # A data-movement kernel fed x.t().contiguous() (a copy PyTorch made of the input) is moving the
    # input, not laundering: no PyTorch compute ran.
    acc, rules, _ = run(load_candidate, """
class ModelNew(nn.Module):
    def forward(self, x):
        return copy(x.reshape(40, 25).t().contiguous())
""", policy="strict")
    assert acc.copy_kernels == [] and rules == {}
