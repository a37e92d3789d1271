"""x + y through a `@triton.jit` helper that reduces (max, sum) in every program: the shape whose
language walks the interpreter used to repeat at each helper call. Raises unless its worker runs
with kiln's interpreter shortcut installed (`kiln.tools.interpreter`)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl
import triton.runtime.interpreter as interp


@triton.jit
def _shift(v, mask):
    top = tl.max(tl.where(mask, v, -float("inf")), axis=0)
    return v + top * 0.0 + tl.sum(tl.where(mask, v * 0.0, 0.0), axis=0)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, _shift(x, mask) + y, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x, y):
        if not hasattr(interp._patch_lang, "__wrapped__"):
            raise RuntimeError("the interpreter shortcut is not installed in this worker")
        out = torch.empty_like(x)
        n = x.numel()
        add_kernel[(triton.cdiv(n, 128),)](x, y, out, n, BLOCK=128)
        return out
