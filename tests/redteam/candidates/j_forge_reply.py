"""RED TEAM, the judge's boundary (Python past the allowlist, executed with `run_rejected`): the
worker writes zeros of the right size where its outputs belong, and every reply it sends also names
files outside the sandbox (__SENTINELS__) and the reference's feed as its "outputs", the fields the
parent used to load and unlink. kiln must judge the file it made (zeros: incorrect) and touch none of
the named paths."""

import json

import torch

_mods = torch.sys.modules
_cand = _mods["kiln.tools.check.candidate"]
_worker = _mods["kiln.tools.check.worker"].Worker
_handle = _worker._handle
NAMED = json.loads('__SENTINELS_JSON__')


def _zeros(path, data):
    with open(path, "r+b") as f:
        for t in data:
            f.write(bytes(t.numel() * t.element_size()))


def _handle_and_lie(self, raw):
    out = _handle(self, raw)
    out.update(files={"first": NAMED[0], "second": NAMED[1]}, output=NAMED[2], sketches=NAMED[3],
               inputs_file=NAMED[0], after_same=True, samples_us=[0.001] * 50)
    return out


_cand.__dict__["write_raw"] = _zeros  # past the read-only module: straight into its namespace
_worker._handle = _handle_and_lie

# <include relu_kernel>
