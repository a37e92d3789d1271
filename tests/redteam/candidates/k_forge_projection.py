"""RED TEAM, the timing audit's input (Python past the allowlist, executed with `run_rejected`; the
timing protocol on CPU with `time_on_cpu`): every projection the candidate commits holds the
integer 10**400, valid JSON that no float can hold. The reference judges the committed projections
of secretly picked laps; before the fix its audit raised OverflowError, and kiln blamed the problem
(KilnInputError: no record)."""

import torch

_chan = torch.sys.modules["kiln.tools.check.channel"].WorkerChannel
_reply = _chan.reply


def _forge(self, obj):
    for proj in obj.get("projections") or []:
        for leaf in proj.get("leaves") or []:
            if isinstance(leaf.get("p"), list):
                leaf["p"] = [10**400] * len(leaf["p"])
    return _reply(self, obj)


_chan.reply = _forge

# <include relu_kernel>
