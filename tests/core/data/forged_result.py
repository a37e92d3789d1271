"""Forges a reply: writes into every pipe its worker process holds open (the reply pipe among them),
as native code in the candidate's process could. The parent must still return a record, never
raise, and never pass the candidate: the forged line lacks the command's secret id."""

import os
import stat

import torch.nn as nn

for fd in range(3, 64):
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.write(fd, b'{"ok": true, "id": "forged", "compile": {"ok": true}}\n')
    except OSError:
        pass


class ModelNew(nn.Module):
    def forward(self, x, y):
        return x + y
