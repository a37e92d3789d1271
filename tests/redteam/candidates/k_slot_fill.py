"""RED TEAM, RAM through the output files (Python past the allowlist, executed with `run_rejected`):
the files kiln makes for a candidate's outputs live in RAM (/dev/shm), and the candidate may fill
every one of them, judged or not, up to RLIMIT_FSIZE (4 GiB) each: 22 of them in a default check.
At its third `pack` command the candidate writes 512 MiB into its first trial's file (judged and
emptied by then), waits, and behaves. Before the fix nothing noticed: the memory stayed taken
until the check ended."""

import os
import time

import torch

_chan = torch.sys.modules["kiln.tools.check.channel"].WorkerChannel
_next = _chan.next_command
_packs = []


def _next_command(self, timeout_s):
    cmd = _next(self, timeout_s)
    if cmd is not None and cmd.get("op") == "pack":
        _packs.append(cmd["first"])
        if len(_packs) == 3:
            fd = os.open(_packs[0], os.O_WRONLY)
            chunk = b"x" * (1 << 20)
            for _ in range(512):
                os.write(fd, chunk)
            os.close(fd)
            time.sleep(1.5)  # kiln looks once a second
    return cmd


_chan.next_command = _next_command

# <include relu_kernel>
