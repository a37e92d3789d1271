"""RED TEAM, the judge's boundary (Python past the allowlist, executed with `run_rejected`): instead
of filling the file kiln made for its output, the worker puts something else at that path: a
symlink to a readable file outside the sandbox (__TARGET__), a FIFO (a reader that opens it would
block), a directory, or a hard link; where the sandbox forbids the swap it writes garbage instead.
kiln must neither follow, block on nor read any of them, and must end with a record."""

import os

import torch

_cand = torch.sys.modules["kiln.tools.check.candidate"]
MODE, TARGET = "__MODE__", "__TARGET__"


def _swap(path, data):
    try:
        os.unlink(path)
        if MODE == "symlink":
            os.symlink(TARGET, path)
        elif MODE == "fifo":
            os.mkfifo(path)
        elif MODE == "dir":
            os.mkdir(path)
        else:
            os.link(TARGET, path)
    except OSError:  # the sandbox refused: leave garbage in kiln's file
        with open(path, "r+b") as f:
            f.write(b"\x7f" * sum(t.numel() * t.element_size() for t in data))


_cand.__dict__["write_raw"] = _swap  # past the read-only module: straight into its namespace

# <include relu_kernel>
