"""RED TEAM, security (stale state after a signal): not an attack on its own, a candidate that
hangs in forward (it sleeps for minutes). The test sends SIGTERM to the `kiln check` process group
while this candidate hangs, as a user's Ctrl-C in a shell or a batch scheduler would, and looks
for what kiln left behind: its `/dev/shm/kiln-check-*` work folder and the orphaned worker still
sleeping in its own session.
Today: both are left behind. Stopped by kiln cleaning up on SIGTERM (or at its next start) and by
workers that die with their parent (the sandbox's PID namespace, --die-with-parent)."""

import time

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(300)
        x = x.contiguous()
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
