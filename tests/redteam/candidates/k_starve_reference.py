"""RED TEAM, the machine's CPU (Python past the allowlist, executed with `run_rejected`): at import the
candidate forks __N__ processes that stop themselves at once, each in its own session (the kernel's
autogroup shares the CPU per session: one session of hogs would weigh as one process). From its
first trial's second call on, they spin whenever its worker waits for a command and stop while it
answers one: its own commands run at full speed, kiln and the reference get a sliver of the CPU,
and the reference cannot finish before the check's --timeout. Before the fix kiln said the problem
was broken (KilnInputError: `kiln check` exited 2 without a record, and `kiln run` stopped)."""

import os
import signal

import torch

_chan = torch.sys.modules["kiln.tools.check.channel"].WorkerChannel
_next, _reply = _chan.next_command, _chan.reply
_hogs, _armed = [], []


def _hog():
    os.setsid()
    os.kill(os.getpid(), signal.SIGSTOP)
    while True:
        pass


for _ in range(int("__N__")):
    _pid = os.fork()
    if _pid == 0:
        _hog()
    _hogs.append(_pid)


def _signal(sig):
    for p in _hogs:
        os.kill(p, sig)


def _next_command(self, timeout_s):
    cmd = _next(self, timeout_s)
    if cmd is not None:
        _signal(signal.SIGSTOP)  # its own command: the CPU is its own
    return cmd


def _answer(self, obj):
    _reply(self, obj)
    if isinstance(obj.get("first"), list):  # the first trial's outputs are out: from now on
        _armed.append(True)
    if _armed:
        _signal(signal.SIGCONT)


_chan.next_command, _chan.reply = _next_command, _answer

# <include relu_kernel>
