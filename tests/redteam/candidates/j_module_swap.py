"""RED TEAM, staged integrity evidence (Python past the allowlist, executed with `run_rejected`): the
forward is plain PyTorch (a fallback, which `--policy strict` rejects). At import the candidate swaps
kiln's runtime-evidence module in sys.modules for a fake that reports an own kernel and no PyTorch
compute, and patches the module's functions and the worker's `op_integrity` the same way. kiln binds
its evidence functions before the candidate is imported, so none of it changes the verdict."""

import types

import torch
import torch.nn as nn

_mods = torch.sys.modules
_real = _mods["kiln.tools.integrity.runtime"]
_records = _mods["kiln.tools.records"]


def _clean(module, inputs, policy="partial", device="cpu"):
    acc = _records.OpAccounting(own_kernels=["relu_kernel"], own_launches={"relu_kernel": 1})
    return acc, []


def _none(*args, **kwargs):
    return []


fake = types.ModuleType("kiln.tools.integrity.runtime")
fake.inspect_forward, fake.check_outputs, fake.judge = _clean, _none, _real.judge
_mods["kiln.tools.integrity.runtime"] = fake
_real.__dict__.update(inspect_forward=_clean, check_outputs=_none)  # past the read-only module
_mods["kiln.tools.check.candidate"].CandidateWorker.op_integrity = lambda self, cmd: None


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)
