# part: forged timing claims, pasted by redteam_lib.render where a candidate says
# `# <include flatter_samples>`. The candidate's worker used to report its own per-call samples;
# now kiln times each command on its own clock. This one adds to every reply the fields an older
# kiln believed (samples FACTOR x faster, a near-zero `worker_s`, event times): none may change a
# verdict or a figure.
import torch

_Worker = torch.sys.modules["kiln.tools.check.worker"].Worker
_handle = _Worker._handle
FACTOR = 5.0


def _flattering(self, raw):
    reply = _handle(self, raw)
    reply.update(samples_us=[1.0 / FACTOR] * 50, worker_s=1e-6, event_us=1.0, wall_us=1.0, n_calls=50)
    return reply


_Worker._handle = _flattering
