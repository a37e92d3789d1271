"""RED TEAM, the worker protocol (Python past the allowlist, executed with `run_rejected`): at the
first trial the worker misbehaves as __MODE__ says: it hangs, replies half a line and exits, sends a
reply of 16 MiB, kills its own process group, or stops itself (SIGSTOP). kiln must end the check with a named status and
reason, within its --timeout plus a few seconds."""

import os
import signal
import time

import torch

_chan = torch.sys.modules["kiln.tools.check.channel"].WorkerChannel
_reply = _chan.reply
MODE = "__MODE__"


def _misbehave(self, obj):
    if "input_fp" not in obj:  # before the first trial: behave
        return _reply(self, obj)
    if MODE == "hang":
        time.sleep(3600)
    if MODE == "half":
        os.write(self._w, b'{"ok": true, "id": "')
        os._exit(0)
    if MODE == "huge":
        os.write(self._w, b'{"ok": true, "pad": "' + b"x" * (16 << 20))
    if MODE == "killpg":
        os.killpg(0, signal.SIGKILL)
    if MODE == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    return _reply(self, obj)


_chan.reply = _misbehave

# <include relu_kernel>
