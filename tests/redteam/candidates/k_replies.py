"""RED TEAM, replies that are JSON (or nearly) but hostile (Python past the allowlist, executed with
`run_rejected`). As __MODE__ says, the worker:
- `deep`: answers its first trial with a value nested 200,000 lists deep (Python's JSON reader gives
  up with RecursionError, not ValueError);
- `compile`: answers its build with a compile record whose fields have the wrong types (`ok: "maybe"`);
- `names`: describes its outputs under names the reference's outputs do not have;
- `bigerror`: raises an exception whose message is 6 MiB (under the 8 MiB reply cap);
- `badstr`: raises an exception whose __str__ raises.
Before the fix the first three were `error` records blaming kiln ("this is kiln's bug") and the
fourth put 6 MiB into the record's reasons, and so into the Coder's next prompt."""

# ruff: noqa: F821 - relu comes from parts/relu_kernel.py (# <include>)
import os

import torch

_chan = torch.sys.modules["kiln.tools.check.channel"].WorkerChannel
_reply = _chan.reply
MODE = "__MODE__"
_calls = []


def _hostile(self, obj):
    if MODE == "deep" and "input_fp" in obj:
        os.write(self._w, b'{"ok": true, "id": "' + str(obj.get("id")).encode() + b'", "x": '
                 + b"[" * 200_000 + b"]" * 200_000 + b"}\n")
        return None
    if MODE == "compile" and "first_call_s" in obj:  # the build's reply: a compile error surfacing late
        obj["compile"] = {"ok": "maybe", "errors": ["x"]}
    if MODE == "names" and isinstance(obj.get("first"), list):
        for leaf in obj["first"] + obj["second"]:
            leaf["name"] = "not-an-output"
    return _reply(self, obj)


_chan.reply = _hostile


class _Unprintable(Exception):
    def __str__(self):
        raise ValueError("no text for you")


def _misbehave():
    _calls.append(1)
    if len(_calls) == 2:  # the first trial (the first call is the build's warm-up)
        if MODE == "bigerror":
            raise RuntimeError("x" * (6 << 20))
        if MODE == "badstr":
            raise _Unprintable()

# <include relu_kernel>

_relu = relu


def relu(x):
    _misbehave()
    return _relu(x)
