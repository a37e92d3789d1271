"""RED TEAM, class 4 (slowing the eager baseline), against baselines timed in their own worker after
the candidate's worker is closed: kiln binds its command handlers before candidate code is imported,
so wrapping a command no longer reaches anything; instead this honest Triton GEMM starts, at import,
a detached process (its own session, through `torch.sys.modules["subprocess"]`) that keeps the GPU
busy with large matmuls for 60 s, meant to outlive the worker and share the GPU with the baseline
worker's timed kernels. Stopped by the sandbox ending everything a worker started when the worker
ends (the fork server kills what a worker left behind; bubblewrap's PID namespace), and by the
allowlist (`torch.sys`, subprocess)."""
# ruff: noqa: F821 - the kernel comes from parts/matmul_kernel.py (# <include>)

import torch

_subprocess = torch.sys.modules.get("subprocess") or __import__("subprocess")
_HOG = """
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.time() + 60.0
while time.time() < end:
    for _ in range(8):
        a @ a
    torch.cuda.synchronize()
"""
_subprocess.Popen([torch.sys.executable, "-c", _HOG], start_new_session=True,
                  stdin=_subprocess.DEVNULL, stdout=_subprocess.DEVNULL, stderr=_subprocess.DEVNULL)

# <include matmul_kernel>
