"""Makes its worker write a malformed result file (by hooking os.replace, which the worker uses to
publish results): the parent must still return a record, never raise, and never pass it."""

import os

import torch.nn as nn

GARBAGE = '{"compile": {"ok": "not-a-bool", "bogus": 1}, "trials": [{"case": 3}], "correctness_done": true}'
_replace = os.replace


def _forge(src, dst):
    if str(dst).endswith("result.json"):
        with open(dst, "w") as f:
            f.write(GARBAGE)
    else:
        _replace(src, dst)


os.replace = _forge


class ModelNew(nn.Module):
    def forward(self, x, y):
        return x + y
