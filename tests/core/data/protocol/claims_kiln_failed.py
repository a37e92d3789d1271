"""Make a candidate's own failure read as kiln's bug (a red-team find, 2026-12-07).

On its first trial forward() raises kiln's own WorkerError with kind "kiln". The worker's generic
handler copies `exc.kind` into the error reply; the parent (session._command_failure) takes
kind "kiln"/"protocol" from the candidate's worker at its word and records status `error` with the
candidate's text as kiln's failure, instead of `crashed`. Needs run_rejected (imports kiln).
Not a KilnInputError (the problem is not blamed); a misattribution to kiln only. Now a failure
of kiln's own code reported by the candidate's worker counts against the candidate (`crashed`).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

from kiln.tools.check.worker import WorkerError


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x, y):
        self.calls += 1
        if self.calls > 1:
            raise WorkerError("kiln", "kiln's judge failed: CUDA driver error (internal)")
        out = torch.empty_like(x)
        n = x.numel()
        add_kernel[(triton.cdiv(n, 256),)](x, y, out, n, BLOCK=256)
        return out
