"""RED TEAM, class 4 (slowing the eager baseline, timed in the candidate's own process), with only
torch and literal attribute names: a global forward pre-hook
(`torch.nn.modules.module.register_module_forward_pre_hook`) runs before every nn.Module call in
the process, so before the reference `Model` kiln times as the eager baseline (and the compiled
one). For any module but ModelNew it parks the GPU's current stream for ~0.5 ms
(`torch.cuda._sleep`), inside the baseline's timed region. The kernel is an honest Triton GEMM.
Today: `ok`, with eager measured ~0.5 ms slow and the speedups inflated. Stopped by timing the
baselines in a process that never imported the candidate, and the allowlist (global hooks)."""

import torch


def _slow_everyone_else(module, args):
    if type(module).__name__ != "ModelNew" and torch.cuda.is_available():
        torch.cuda._sleep(1_000_000)  # GPU clock cycles: ~0.5 ms at H200 clocks


torch.nn.modules.module.register_module_forward_pre_hook(_slow_everyone_else)

# <include matmul_kernel>
