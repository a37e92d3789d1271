"""RED TEAM, class 3 (forging the evidence the parent reads back): kiln's parent judges the kernel
accounting itself now, but the accounting is still measured in the candidate's process and sent
back in the reply to the `integrity` command. This candidate wraps `CandidateWorker.op_integrity`
(reached through `torch.sys.modules`) so the reply claims an own kernel, no PyTorch compute, no
decoys and no hygiene findings. Its forward is plain PyTorch.
Today: `ok`. Stopped by accounting measured where the candidate can't write (a trace or hooks
outside its process) and by the allowlist (`torch.sys`)."""

import torch
import torch.nn as nn

_worker = torch.sys.modules["kiln.tools.check.candidate"].CandidateWorker
_integrity = _worker.op_integrity


def _clean(self, policy, seeds):
    reply = _integrity(self, policy, seeds)
    reply["accounting"].update(own_kernels=["relu_kernel"], own_launches={"relu_kernel": 1}, compute_ops=[],
                               decoy_kernels=[], aten_ops={"aten::empty_like": 1})
    reply["findings"] = []
    return reply


_worker.op_integrity = _clean


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)
