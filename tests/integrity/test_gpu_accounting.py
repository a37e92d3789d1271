"""On the GPU: the profiler-based accounting can't be fooled by names. A library kernel launched from
an ATen operator stays a library kernel even when the candidate claims its name; a string naming
it claims nothing; copy kernels that launder PyTorch's result are caught with compiled Triton and
the grid callable's torch work is counted. Run on the H200:
`pytest -m gpu tests/integrity/test_gpu_accounting.py -s`."""

from __future__ import annotations

import importlib.util
import re
import sys
import uuid
from pathlib import Path
from types import ModuleType

import pytest
import torch

from kiln.tools.integrity.own_kernels import classify
from kiln.tools.integrity.runtime import inspect_forward

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

HEAD = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)
"""


def load(tmp_path: Path, body: str) -> ModuleType:
    name = f"kiln_gpu_acc_{uuid.uuid4().hex[:8]}"
    path = tmp_path / f"{name}.py"
    path.write_text(HEAD + body)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def mm_kernel_names(a: torch.Tensor, b: torch.Tensor) -> list[str]:
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.mm(a, b)
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == DeviceType.CUDA]


def test_a_library_kernel_claimed_by_name_stays_library(tmp_path: Path) -> None:
    from torch.profiler import ProfilerActivity, profile

    mod = load(tmp_path, "")
    a, b = torch.randn(512, 384, device="cuda"), torch.randn(384, 256, device="cuda")
    claimed = set(mm_kernel_names(a, b))
    assert claimed, "torch.mm launched no kernel?"
    y = torch.empty(512 * 256, device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        z = torch.mm(a, b).reshape(-1)
        mod.copy_kernel[(triton_cdiv(z.numel(), 1024),)](z, y, z.numel(), BLOCK=1024)
        torch.cuda.synchronize()
    events = list(prof.events())
    own, lib = classify(events, claimed | {"copy_kernel"})
    print(f"\nown {sorted(own)}\nlibrary {sorted(lib)}")
    for e in events:  # how the profiler linked each kernel, for whoever debugs a failure here
        print(e.device_type, e.id, getattr(e, "linked_correlation_id", None), e.name[:60],
              [k.name[:40] for k in getattr(e, "kernels", [])])
    assert set(own) == {"copy_kernel"}
    assert claimed <= set(lib)


def triton_cdiv(n: int, d: int) -> int:
    return (n + d - 1) // d


def test_a_string_naming_the_library_kernel_claims_nothing(tmp_path: Path) -> None:
    a, b = torch.randn(67, 129, device="cuda"), torch.randn(129, 95, device="cuda")
    ident = next((m.group(1) for n in mm_kernel_names(a, b) if (m := re.search(r"([A-Za-z_]\w{5,})", n))), "gemm")
    mod = load(tmp_path, f'''
CLAIM = 'extern "C" __global__ void {ident}(float* x) {{ }}'


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(129, 95))

    def forward(self, x):
        return torch.relu(x @ self.w)
''')
    acc, findings = inspect_forward(mod.ModelNew().cuda(), (a,), policy="partial", device="cuda")
    print(f"\nclaimed {ident!r}: own {acc.own_kernels}, library {acc.library_kernels}, share {acc.own_time_share}")
    assert acc.own_kernels == [] and acc.own_time_share == 0.0
    assert "runtime.no-own-kernel" in {f.rule for f in findings if f.severity == "reject"}


LAUNDER = """
class ModelNew(nn.Module):
    def forward(self, x):
        answer = torch.softmax(x, -1)
        out = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](answer, out, x.numel(), BLOCK=1024)
        return out
"""
GRID = """
class ModelNew(nn.Module):
    def forward(self, x):
        out, scratch = torch.empty_like(x), torch.empty_like(x)

        def grid(meta):
            scratch.copy_(torch.softmax(x, -1))
            return (triton.cdiv(x.numel(), meta["BLOCK"]),)

        copy_kernel[grid](scratch, out, x.numel(), BLOCK=1024)
        return out
"""
HONEST = """
@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0 + 1.0, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return torch.softmax(y, -1)
"""


@pytest.mark.parametrize(("body", "launder"), [(LAUNDER, True), (GRID, True), (HONEST, False)],
                         ids=["copy-of-torch", "torch-in-grid-callable", "honest-partial"])
def test_laundering_with_compiled_triton(tmp_path: Path, body: str, launder: bool) -> None:
    mod = load(tmp_path, body)
    x = torch.randn(37, 1000, device="cuda")
    acc, findings = inspect_forward(mod.ModelNew(), (x,), policy="partial", device="cuda")
    rules = {f.rule for f in findings if f.severity == "reject"}
    print(f"\ncompute {acc.compute_ops}, own {acc.own_kernels}, library {acc.library_kernels}, copies {acc.copy_kernels}")
    assert "aten::_softmax" in acc.compute_ops
    assert ("runtime.launder" in rules) is launder
    assert (acc.copy_kernels == ["copy_kernel"]) is launder
