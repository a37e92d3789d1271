"""RED TEAM, numbers the timing stage reads (Python past the allowlist, executed with `run_rejected`;
the timing protocol on CPU with `time_on_cpu`): valid JSON that no float can hold. As __MODE__ says:
- `projection`: every projection it commits holds the integer 10**400. The reference judges the
  committed projections of secretly picked laps; before the fix its audit raised OverflowError and
  kiln blamed the problem (KilnInputError: no record);
- `peak`: it claims a peak memory of 10**400 bytes; before the fix kiln's own division of it by the
  eager baseline's raised OverflowError (an `error` record blaming kiln)."""

import torch

_chan = torch.sys.modules["kiln.tools.check.channel"].WorkerChannel
_reply = _chan.reply
MODE = "__MODE__"


def _forge(self, obj):
    if MODE == "projection":
        for proj in obj.get("projections") or []:
            for leaf in proj.get("leaves") or []:
                if isinstance(leaf.get("p"), list):
                    leaf["p"] = [10**400] * len(leaf["p"])
    if MODE == "peak" and "peak_bytes" in obj:
        obj["peak_bytes"] = 10**400
    return _reply(self, obj)


_chan.reply = _forge

# <include relu_kernel>
