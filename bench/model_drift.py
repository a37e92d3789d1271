"""Does eager get slower inside a `kiln model` process (issue 24)? Runs `kiln model` in this process
with the run's stage clock wrapped: at every stage boundary the target's eager forward is timed
with kiln model's own in-model timer (`inmodel._one`, CUDA events and the host's issue time), and
the process's threads and their CPU time since the last boundary are listed. A fresh copy of the
model, built here before the run and never touched by it, is timed beside it (a process-wide effect
slows both; one on the run's own model object slows only that).

    . bench/device_env.sh && python3 bench/model_drift.py examples/model/sd_resblock.py:make -- \
        --device cuda --dtype fp32 --top 2 --max-iters 1 --budget-minutes 2.7 --out /tmp/md
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import threading
import time

DEVICE = "cpu"


def _cpu_by_thread() -> dict[str, float]:
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as fh:
                f = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[tid] = (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    return out


def main() -> int:
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    target, rest = argv[0], argv[cut + 1:]
    import torch

    from kiln.evals import cli
    from kiln.evals.model import run as run_mod
    from kiln.evals.model.inmodel import _one, forward
    from kiln.evals.model.targets import build, place

    global DEVICE
    DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = rest[rest.index("--dtype") + 1] if "--dtype" in rest else "fp32"
    fresh = forward(place(build(target), DEVICE, dtype))
    seen: dict = {"t": None, "cpu": _cpu_by_thread(), "at": time.monotonic()}

    def timed(fn) -> dict:
        for _ in range(5):
            fn()
        if DEVICE == "cuda":
            torch.cuda.synchronize()
        gpu, host = zip(*(_one(fn, DEVICE == "cuda") for _ in range(30)), strict=True)
        return {"gpu_us": round(statistics.median(gpu), 1), "host_us": round(statistics.median(host), 1)}

    def report(where: str) -> None:
        cpu, now = _cpu_by_thread(), time.monotonic()
        busy = {t: round(c - seen["cpu"].get(t, 0.0), 2) for t, c in cpu.items() if c - seen["cpu"].get(t, 0.0) > 0.05}
        row = {"at": where, "wall_s": round(now - seen["at"], 1), "threads": threading.active_count(),
               "os_threads": len(cpu), "busy_cpu_s": busy, "thread_names": sorted(t.name for t in threading.enumerate()),
               "fresh_copy": timed(fresh)}
        if seen["t"] is not None:
            row["run_model"] = timed(forward(seen["t"]))
        print("DRIFT", json.dumps(row), flush=True)
        seen["cpu"], seen["at"] = _cpu_by_thread(), time.monotonic()

    stage, build_ = run_mod.Run._stage, run_mod.Run.build

    def _stage(self, name: str) -> None:
        report(f"before {name}")
        stage(self, name)

    def _build(self):
        seen["t"] = build_(self)
        return seen["t"]

    run_mod.Run._stage, run_mod.Run.build = _stage, _build
    report("start")
    sys.argv = ["kiln", "model", target, *rest]
    with contextlib.suppress(SystemExit):
        cli.main()
    report("end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
