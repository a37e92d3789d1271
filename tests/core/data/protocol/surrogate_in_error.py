"""A lone UTF-16 surrogate in the candidate's exception message (a red-team find, 2026-12-07).

forward() raises RuntimeError whose text holds chr(0xD800). The worker's reply is json.dumps'd
(ensure_ascii escapes it as \\ud800), the parent's json.loads turns it back into a lone surrogate,
and ErrorInfo.message (Text) keeps it: it lands in rec.reasons / first_failure. A str with a lone
surrogate cannot be encoded as UTF-8, so `rec.model_dump_json()` (the CLI's --json, every store
that writes records as JSON) raises PydanticSerializationError, and printing the reason to a UTF-8
stdout raises UnicodeEncodeError: `kiln check` died with a traceback and no JSON. No static rule is
needed: the file uses only allowed names. Now the channel turns every lone surrogate into '?', and
`check()` rebuilds any record some other text would make unwritable.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


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
        if self.calls > 1:  # the build's first call passes; the first trial raises
            raise RuntimeError("bad input \ud800 here")
        out = torch.empty_like(x)
        n = x.numel()
        add_kernel[(triton.cdiv(n, 256),)](x, y, out, n, BLOCK=256)
        return out
