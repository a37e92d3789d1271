"""Where a patched model's forward spends its time, eager against patched (issue 24): the host's time
to issue one forward, the forward's time on CUDA events, the GPU kernels' own time (torch.profiler),
and the host-device synchronisations and copies inside one forward (a sync in a patched call stops
the host running ahead of the GPU, so the forward becomes host time plus GPU time).

    . bench/device_env.sh && python3 bench/model_probe.py examples/model/sd_resblock.py:make RUN/bundle
    ... RUN/bundle --tried --only fused_group_norm_ac9bfff8   # one tried group alone
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter

SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy", "cudaMemcpyAsync")


def main() -> int:
    import torch

    import kiln
    from kiln.evals.model.inmodel import _one, forward
    from kiln.evals.model.targets import build, place

    ap = argparse.ArgumentParser()
    ap.add_argument("target")
    ap.add_argument("bundle")
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--tried", action="store_true", help="every kernel the run tried (manifest.tried.json), "
                                                         "not only the kept ones")
    ap.add_argument("--only", action="append", default=[], help="patch only this group (repeatable)")
    a = ap.parse_args()
    t = place(build(a.target), "cuda", a.dtype)
    bundle = kiln.load(a.bundle)
    if a.tried:
        from pathlib import Path

        from kiln.evals.model.bundle import Bundle
        from kiln.evals.model.records import BundleManifest

        folder = Path(a.bundle)
        bundle = Bundle(folder, BundleManifest.model_validate_json((folder / "manifest.tried.json").read_text()))

    fwd = forward(t)

    rows = {}
    for variant in ("eager", "patched", "eager again"):
        handle = bundle.apply(t.model, only=set(a.only) or None) if variant == "patched" else None
        for _ in range(5):
            fwd()
        torch.cuda.synchronize()
        host, gpu = [], []
        for _ in range(a.n):  # kiln model's own in-model timer: CUDA events around one forward, and the host's time
            g, h = _one(fwd, True)
            gpu.append(g)
            host.append(h)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                torch.profiler.ProfilerActivity.CUDA]) as prof:
            fwd()
            torch.cuda.synchronize()
        events = prof.events()
        api = Counter(e.name for e in events if e.name in SYNCS)
        kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
        rows[variant] = {"host_issue_us": round(statistics.median(host), 1), "forward_us": round(statistics.median(gpu), 1),
                         "kernel_us": round(sum(e.device_time for e in kernels), 1), "kernels": len(kernels),
                         "syncs_and_copies": dict(api),
                         "top_kernels": sorted(((e.name[:60], round(e.device_time, 1)) for e in kernels),
                                               key=lambda kv: -kv[1])[:10],
                         "top_cpu_ops": [(e.key, e.count, round(e.cpu_time_total, 1))
                                         for e in sorted(prof.key_averages(), key=lambda k: -k.cpu_time_total)[:12]]}
        if handle is not None:
            rows[variant]["kernel_calls"] = dict(getattr(handle, "calls", {}) or {})
            handle.remove()
        print(variant, json.dumps(rows[variant], indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
