"""Shared code emission: node expressions, dependency walks, and the ModelNew wrapper."""

from __future__ import annotations

from kiln.agents.builtin.ops import render
from kiln.agents.builtin.plan import Plan

IMPORTS = """import torch
import torch.nn as nn
import triton
import triton.language as tl
"""

F32_DOT_HELPER = '''

def _kiln_f32_dot(t, k, prec):
    """An fp32 tl.dot's input precision. "bf16x3" (each operand split in two bf16 halves, three bf16
    products: about 16 of fp32's 24 mantissa bits, at half the tensor-core time of tf32x3) where the
    GPU's Triton has it (3.6 on) and a dot sums at least 64 products; otherwise tf32x3 (the CPU
    interpreter, an older Triton, a short sum whose reference error is tiny next to bf16x3's)."""
    if prec != "bf16x3":
        return prec
    new = tuple(int(v) for v in triton.__version__.split(".")[:2] if v.isdigit()) >= (3, 6)
    return "bf16x3" if t.is_cuda and k >= 64 and new else "tf32x3"
'''

HELPERS = '''
_KILN_NSM = {}


def _kiln_sm_count(device):
    """Streaming multiprocessors of the device (persistent grids); a small number on CPU."""
    if device.type != "cuda":
        return 4
    if device.index not in _KILN_NSM:
        _KILN_NSM[device.index] = torch.cuda.get_device_properties(device).multi_processor_count
    return _KILN_NSM[device.index]
'''


def expr(plan: Plan, i: int) -> str:
    n = plan.g.nodes[i]
    if n.kind == "const":
        return f"({n.value!r})" if n.value < 0 else repr(n.value)
    if n.kind == "rsize":
        return "R"
    return f"v{i}"


def op_line(plan: Plan, i: int) -> str:
    n = plan.g.nodes[i]
    return f"v{i} = {render(n.op, [expr(plan, a) for a in n.args], n.params)}"


def ancestors(plan: Plan, targets: list[int], stop: set[int]) -> list[int]:
    """Live nodes the targets depend on (targets included), not looking past `stop`, in order."""
    need: set[int] = set()
    todo = list(targets)
    while todo:
        i = todo.pop()
        if i in need:
            continue
        need.add(i)
        if i not in stop:
            todo.extend(plan.g.nodes[i].args)
    return [i for i in plan.live if i in need]


def input_exprs(plan: Plan) -> list[str]:
    return [plan.g.inputs[plan.g.nodes[i].input].expr for i in plan.loads]


def model_class(init_args: str, init_body: str, fwd_args: list[str], fwd_body: str) -> str:
    body = "\n".join("        " + ln if ln.strip() else "" for ln in init_body.splitlines())
    fwd = "\n".join("        " + ln if ln.strip() else "" for ln in fwd_body.strip("\n").splitlines())
    sig = ", ".join(["self", *fwd_args])
    return (
        "\n\nclass ModelNew(nn.Module):\n"
        f"    def __init__({init_args}):\n{body}\n\n"
        f"    def forward({sig}):\n{fwd}\n"
    )


def contig(names: list[str]) -> str:
    """Forward lines binding t0, t1, ... to the kernel's tensors (a copy only if not contiguous)."""
    return "\n".join(
        f"t{k} = {e} if {e}.is_contiguous() else {e}.contiguous()" for k, e in enumerate(names)
    )
