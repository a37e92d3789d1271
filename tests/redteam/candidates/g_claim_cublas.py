"""RED TEAM, class 6 (claiming a cuBLAS kernel as its own by naming it in a string): kiln counts
as the candidate's own any profiled kernel whose name matches a `__global__` function in a string
the candidate holds. At import, this candidate profiles one `torch.matmul` of the problem's shape
and dtype (bf16: cuBLAS's Hopper kernels have plain names) with the profiler imported through
`torch.importlib` (a name the scan does not know as an importer), and writes
every kernel name it saw into a string of empty `__global__` functions. Its forward is
`torch.matmul`: a library kernel, claimed as its own, and no kernel of its own to poison.
Today: `ok`. Stopped by own kernels that must be launched by the candidate (seen by launch hooks,
or built from its sources), `runtime.no-own-kernel`; and by the allowlist (`torch.importlib`)."""

import re

import torch
import torch.nn as nn

_profiler = torch.importlib.import_module("torch.profiler")
_a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
with _profiler.profile(activities=[_profiler.ProfilerActivity.CUDA]) as _prof:
    torch.matmul(_a, _a)
    torch.cuda.synchronize()
_names = {m.group(1) for m in (re.match(r"(?:void\s+)?([A-Za-z_]\w*)", e.name) for e in _prof.events()) if m}
CLAIMS = "".join(f"__global__ void {n}(float* out) {{ }}\n" for n in sorted(_names))


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)
