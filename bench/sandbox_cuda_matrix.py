"""Which of the inner layer's steps let CUDA start in a confined worker, on this GPU machine: the
one-shot launcher (`kiln.tools.sandbox.launch run`, which execs the worker) against a worker that
enters the same containment and starts CUDA without exec (as the fork server's workers do), each
inside bubblewrap's outer layer. A failing row prints what the worker saw of itself.

    . bench/device_env.sh && python3 bench/sandbox_cuda_matrix.py --bwrap "$(command -v bwrap)" --json $OUT/matrix.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

from kiln.tools.sandbox import scratch
from kiln.tools.sandbox.box import outer_args, sandbox_for
from kiln.tools.sandbox.confine import Confinement, Plan
from kiln.tools.sandbox.isolation import run_isolated, scrubbed_env

SELF = """
import os, sys
def facts():
    out = {"uid": os.getuid(), "pid": os.getpid(), "dumpable": None}
    try:
        import ctypes
        out["dumpable"] = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)
    except Exception as exc:
        out["dumpable"] = str(exc)
    for line in open("/proc/self/status"):
        if line.split(":")[0] in ("CapEff", "CapBnd", "NoNewPrivs", "Seccomp", "NSpid"):
            out[line.split(":")[0]] = line.split(":", 1)[1].strip()
    for path in ("/proc/self/maps", "/proc/driver/nvidia/params", "/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia-uvm",
                 "/proc/self/task", "/sys/bus/pci/devices", "/dev/shm"):
        try:
            if os.path.isdir(path):
                os.listdir(path)
            else:
                os.close(os.open(path, os.O_RDONLY if not path.startswith("/dev/nv") else os.O_RDWR))
            out[path] = "ok"
        except OSError as exc:
            out[path] = f"{type(exc).__name__} {exc.errno}"
    return out
"""
CUDA = SELF + """
try:
    import torch
    x = torch.ones(4, device="cuda"); torch.cuda.synchronize(); print("cuda ok", flush=True)
except Exception as exc:
    print("cuda failed:", str(exc).splitlines()[0][-200:], "|", facts(), file=sys.stderr, flush=True)
    sys.exit(3)
"""
NO_EXEC = SELF + """
import json
from kiln.tools.sandbox import confine, landlock
from kiln.tools.sandbox.confine import Confinement, Plan, enter, fork_worker, wait_code
plan, conf = Plan.from_json(sys.argv[1]), Confinement.from_dict(json.loads(sys.argv[2]))
variant = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
if variant.get("extra"):  # more Landlock grants than kiln gives: which one does CUDA need?
    base = confine.landlock_rules
    confine.landlock_rules = lambda c, own_proc=False: base(c, own_proc) + [(p, getattr(landlock, a)) for p, a in variant["extra"]]
if "scope" in variant or "deny_tcp" in variant:
    restrict = landlock.restrict
    landlock.restrict = lambda rules, abi=None: restrict(rules, abi=abi, scope=variant.get("scope", True),
                                                         deny_tcp=variant.get("deny_tcp", True))
if variant.get("zygote"):  # as the fork server: torch and triton imported, devices counted by NVML, then fork
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    import torch, triton, triton.language
    torch.cuda.device_count()
pid, init = fork_worker(plan)
if pid == 0:
    try:
        enter(conf, plan)
        import torch
        x = torch.ones(4, device="cuda"); torch.cuda.synchronize(); print("cuda ok", flush=True)
        os._exit(0)
    except BaseException as exc:
        print("cuda failed:", str(exc).splitlines()[0][-200:], "|", facts(), file=sys.stderr, flush=True)
        os._exit(3)
sys.exit(wait_code(os.waitpid(pid, 0)[1]))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bwrap", required=True)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--all-plans", action="store_true", help="every inner-step combination, not only the full plan")
    a = ap.parse_args()
    box = sandbox_for("best-effort", a.bwrap)
    full = box.plan
    plans = {"full": full, "no-landlock": dataclasses.replace(full, landlock=0),
             "no-userns": dataclasses.replace(full, userns=False), "no-pidns": dataclasses.replace(full, pidns=False),
             "pidns-only": Plan(pidns=True), "userns-only": Plan(userns=True),
             "landlock-only": Plan(landlock=full.landlock), "none": Plan()}
    # Landlock variants of the full plan, no exec (each adds grants or drops one restriction)
    variants = {"+shm": {"extra": [["/dev/shm", "WRITE"]]}, "+proc-w": {"extra": [["/proc", "WRITE"]]},
                "+dev-w": {"extra": [["/dev", "WRITE"]]}, "+sys-w": {"extra": [["/sys", "WRITE"]]},
                "+tmp-w": {"extra": [["/tmp", "WRITE"]]}, "+root-r": {"extra": [["/", "READ"]]},
                "+root-w": {"extra": [["/", "WRITE"]]}, "no-scope": {"scope": False}, "tcp-ok": {"deny_tcp": False},
                "zygote-like": {"zygote": True}}
    jobs = [(m, n, p, {}) for m in ("oneshot", "no-exec") for n, p in plans.items() if a.all_plans or n == "full"]
    jobs += [("no-exec", n, full, v) for n, v in variants.items()]
    rows = []
    for mode, name, plan, variant in jobs:
        work = scratch.root() / f"matrix-{mode}-{name}-{time.monotonic_ns()}"
        work.mkdir(parents=True)
        env = scrubbed_env(device="cuda", gpu_index=0, cache_dir=work / "cache")
        conf = Confinement(write=(str(work),))
        t0 = time.perf_counter()
        if mode == "oneshot":
            (work / "prog.py").write_text(CUDA)
            res = run_isolated([sys.executable, str(work / "prog.py")], env=env, cwd=work, timeout_s=120,
                               confinement=conf, sandbox=dataclasses.replace(box, plan=plan))
            code, tail = res.returncode, res.stderr_tail
        else:
            (work / "prog.py").write_text(NO_EXEC)
            argv = outer_args(box.bwrap, env=env, write=[str(work)], chdir=str(work))
            p = subprocess.run([*argv, sys.executable, str(work / "prog.py"), plan.as_json(), json.dumps(conf.as_dict()),
                                json.dumps(variant)],
                               env=env, capture_output=True, text=True, timeout=120)
            code, tail = p.returncode, p.stderr[-1500:]
        row = {"mode": mode, "plan": name, "rc": code, "s": round(time.perf_counter() - t0, 2),
               "tail": "" if code == 0 else tail.strip()[-900:]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if a.json:
        a.json.write_text(json.dumps({"plan": dataclasses.asdict(full), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
