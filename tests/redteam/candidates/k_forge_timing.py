"""RED TEAM, numbers the timing stage reads (Python past the allowlist, executed with `run_rejected`;
the timing protocol on CPU with `time_on_cpu`): valid JSON that no float can hold. As __MODE__ says:
- `projection`: every projection it commits holds the integer 10**400. The reference judges the
  committed projections of secretly picked laps; before the fix its audit raised OverflowError and
  kiln blamed the problem (KilnInputError: no record);
- `peak`: it claims a peak memory of 10**400 bytes; before the fix kiln's own division of it by the
  eager baseline's raised OverflowError (an `error` record blaming kiln);
- `bloated`: every commit reply carries ~2 M empty JSON objects inside a projection, just under the
  8 MiB reply cap: kiln's process parsed each into a dict (2 GB at its peak, 11 s of audit; a red-team
  find, 2026-12-07);
- `extra`: one unknown field in a projection, which kiln's typed record took without a look."""

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
    if MODE in ("bloated", "extra") and obj.get("projections"):
        leaf = obj["projections"][0]["leaves"][0]
        leaf["junk"] = [{}] * ((8 << 20) // 4 - 16000) if MODE == "bloated" else 1
    if MODE == "peak" and "peak_bytes" in obj:
        obj["peak_bytes"] = 10**400
    return _reply(self, obj)


_chan.reply = _forge

# <include relu_kernel>
