"""RED TEAM, class 4 (slowing the eager baseline), against baselines timed in their own worker: the
candidate's worker stays alive, idle, while kiln times the baselines right after the candidate's
own timed loop. This honest Triton GEMM wraps its worker's `time_after` command (through
`torch.sys.modules`) to start a thread that keeps the GPU busy with large matmuls for 30 s, after
the thread count was taken: the baseline worker's kernels share the GPU with it and run slower.
Today: `ok`, eager measured slow and the speedups inflated (expected). Stopped by a sandbox that
freezes or ends the candidate's processes while anything else is timed (or baselines timed before
it runs), and by the allowlist (`torch.sys`, threads)."""
# ruff: noqa: F821 - the kernel comes from parts/matmul_kernel.py (# <include>)

import time

import torch

_threading = torch.sys.modules["threading"]
_CandidateWorker = torch.sys.modules["kiln.tools.check.candidate"].CandidateWorker
_time_after = _CandidateWorker.op_time_after


def _hog_the_gpu(seconds=30.0):
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(8):
            a @ a
        torch.cuda.synchronize()


def _time_after_then_hog(self):
    reply = _time_after(self)
    _threading.Thread(target=_hog_the_gpu, daemon=True).start()
    return reply


_CandidateWorker.op_time_after = _time_after_then_hog

# <include matmul_kernel>
