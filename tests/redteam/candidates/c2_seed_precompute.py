"""RED TEAM, class 2 (the secret seed): the candidate worker's job file (`job.json`, in its working
directory) holds the run's secret seed and the problem's path. At import, before any accounting
starts, this candidate reads it (through `torch.os`, never `open`), loads the problem, regenerates
every input kiln will draw (each trial and distribution, the warm-up, the integrity and timing
sets) with kiln's own `make_inputs`, runs the reference `Model` on them, and keeps the answers. Its
forward only looks the answer up and copies it out with a Triton kernel: no PyTorch compute inside
forward, so even the `strict` policy passes. Without the seed its answers are wrong (a copy of x).
Before main's check session (e2378cb): `ok` under strict. Now: `compile_error`, the job file holds
no seed (the judge outside the accused keeps it); kept as a regression test. The allowlist
(`torch.os`, `torch.sys`) would reject it too."""
# ruff: noqa: F821 - copy_out comes from parts/copy_kernel.py (# <include>)

import json

import torch
import torch.nn as nn

# <include copy_kernel>


def _read(path):
    fd = torch.os.open(path, torch.os.O_RDONLY)
    data = torch.os.read(fd, 1 << 22)
    torch.os.close(fd)
    return data


def _key(x):
    return (tuple(x.shape), tuple(x.reshape(-1)[:16].tolist()))


def _draws(job):
    """Every (tag, distribution, trial) the candidate worker draws inputs for."""
    draws = [(c["name"], d, t) for c in job["cases"] for d in job["distributions"] for t in range(job["trials"])]
    draws += [("warmup", "x1", 0), ("integrity", "x1", 0)]
    draws += [("integrity-outputs", "x1", i) for i in range(3)] + [("timing", "x1", i) for i in range(4)]
    return draws


def _precompute():
    job = json.loads(_read("job.json"))
    problem = torch.sys.modules["kiln.tools.check.worker"].load_module(job["cases"][0]["path"], "answers")
    make_inputs = torch.sys.modules["kiln.tools.inputs"].make_inputs
    model = problem.Model()
    answers = {}
    for tag, dist, trial in _draws(job):
        inputs = make_inputs(problem.get_inputs, secret=job["secret"], case=tag, dist=dist, trial=trial,
                             dtype=job["dtype"], device=job["device"])
        with torch.no_grad():
            answers[_key(inputs[0])] = model(*inputs).contiguous()
    return answers


ANSWERS = _precompute()


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        return copy_out(ANSWERS.get(_key(x), x), x)
