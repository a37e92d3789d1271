"""Zero the deferred-work charge by inflating the candidate's own MAD, with few laps (found by a
red-team pass, 2026-12-07).

The patched harness computes nothing in the lap (it returns at once) and does all of the lap's work
in the commit (outputs right: the audit passes). The charge is
    max(0, med_c - 1.02 med_b - 2 * sqrt(se_c^2 + se_b^2)),  se = 1.2533 * 1.4826 * MAD / sqrt(n)
and se_c comes from the candidate's *own* refresh+commit times. So the commit pads alternate laps
with a long sleep (2m): the overheads are bimodal {D, D + 2m}, median D + m, MAD m. With n = 8 laps
the allowance 2 * se_c = 1.314 m exceeds med_c - med_b = D + m once m > 3.2 D. The sleeps also make
8 laps take longer than `loop_s`, so the loop stops at exactly MIN_LAPS = 8 (n even, the median sits
between the two modes). The reported time was the empty lap's (39-60 us a call against the honest 3,403). The charge now
takes its noise from the baseline's steps only, so the sleeps are charged with the deferred work.
"""

import time

import torch
import torch.nn as nn
import triton
import triton.language as tl

import kiln.tools.timing.laps as laps

_commit = laps.commit
_n = [0]
PAD_S = 0.35  # 2m: long enough that 8 laps outlast loop_s (<= 1.5 s) and 0.314 m beats the deferred work


def _idle_lap(fn, ring):
    ring.outputs, ring.deferred = [], fn
    return len(ring.slots)


def _lazy_commit(ring, key, sigma):
    _n[0] += 1
    with torch.no_grad():
        ring.outputs = [ring.deferred(*slot) for slot in ring.slots]  # the lap's work, done now
    out = _commit(ring, key, sigma)
    if _n[0] % 2 == 0:
        time.sleep(PAD_S)
    return out


laps.__dict__.update(run_lap=_idle_lap, commit=_lazy_commit)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        add_kernel[(triton.cdiv(x.numel(), 256),)](x, y, out, x.numel(), BLOCK=256)
        return out
