"""RED TEAM, class 3 on the GPU (a forged timing record in the result file): an honest Triton GEMM
that wraps the worker's `Results.save` (through `torch.sys.modules`) so the timing record it hands
the parent says 3.2x: its own times divided by 3.2, every speedup and its interval multiplied by
3.2 (the parent recomputes the verdict from the interval, which now says "faster").
Today: `ok` at 3.2x. Stopped by the judge outside the accused (timing measured or cross-checked
where the candidate can't write) and the allowlist (`torch.sys`)."""

import torch

_worker = torch.sys.modules["kiln.tools.check.worker"]
_save = _worker.Results.save
_FORGED = []


def _forged_save(self):
    timing = self.data.get("timing")
    if timing and timing.get("candidate") and id(timing) not in _FORGED:
        _FORGED.append(id(timing))
        for k in ("median_us", "ci_low_us", "ci_high_us", "mean_us", "min_us"):
            if timing["candidate"].get(k):
                timing["candidate"][k] /= 3.2
        for s in timing.get("speedups", {}).values():
            s["value"], s["ci_low"], s["ci_high"] = 3.2 * s["value"], 3.2 * s["ci_low"], 3.2 * s["ci_high"]
    _save(self)


_worker.Results.save = _forged_save

# <include matmul_kernel>
