"""The patch runtime's host path on this machine (issue 24), per call of the cases in
`kiln.evals.model.hostpath`: a group norm -> SiLU pair of stock modules on a tiny CPU tensor, eager and
patched with a kernel that costs nothing (the runtime's own path: guards, placeholder, kernel wrapper,
scope), the pair with a functional tail, a single patched group norm, and their shells (the same
parents with Identity modules); `*_runtime` and `*_eager_ops` are patched and eager less the shell.

    python bench/host_path.py                 # medians of interleaved rounds (us per call)
    python bench/host_path.py --ir            # instructions per call under callgrind (noise-free; ~1 min)

`--ir` runs this file under `valgrind --tool=callgrind` with instrumentation off until torch is
imported, then counts each case's instructions over two loop lengths (their difference per call:
start-up and the control round trips cancel). Instructions are not time, but they do not move with
the machine's load; the timings do (a shared 2-core machine: compare only within one run).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from kiln.evals.model.hostpath import cases, derived, timed


def serve() -> None:
    """The callgrind side: 'ready' once torch is in, then one case per line `name n`, 'done' after each."""
    torch.set_num_threads(1)
    cs = cases()
    with torch.no_grad():
        for fn in cs.values():
            for _ in range(50):
                fn()
        print("ready " + " ".join(cs), flush=True)
        for line in sys.stdin:
            name, n = line.split()
            fn = cs[name]
            for _ in range(int(n)):
                fn()
            print("done", flush=True)


def _ctl(pid: int, *args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, capture_output=True)


def _total(path: Path) -> int:
    """The instruction total of a dump (waited for: callgrind writes it after the control call returns)."""
    for _ in range(100):
        text = path.read_text() if path.exists() else ""
        for line in text.splitlines():
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
        time.sleep(0.1)
    raise RuntimeError(f"no instruction total in {path}")


def instructions(n1: int = 200, n2: int = 1200) -> dict[str, float]:
    """Instructions per call of each case under callgrind ((count at n2 - count at n1) / (n2 - n1))."""
    with tempfile.TemporaryDirectory(prefix="kiln-ir-") as tmp:
        out = Path(tmp) / "cg.out"
        proc = subprocess.Popen(["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                                 sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        assert proc.stdin is not None and proc.stdout is not None
        names = proc.stdout.readline().split()[1:]
        _ctl(proc.pid, "-i", "on")
        res, dumps = {}, 0
        for name in names:
            counts = []
            for n in (n1, n2):
                _ctl(proc.pid, "-z")
                proc.stdin.write(f"{name} {n}\n")
                proc.stdin.flush()
                proc.stdout.readline()
                _ctl(proc.pid, "-d")
                dumps += 1
                counts.append(_total(Path(f"{out}.{dumps}")))
            res[f"{name}_instr"] = (counts[1] - counts[0]) / (n2 - n1)
        proc.stdin.close()
        proc.wait()
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ir", action="store_true", help="instructions per call under callgrind")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=5000, help="calls a round")
    ap.add_argument("--rounds", type=int, default=15)
    a = ap.parse_args()
    if a.serve:
        return serve()
    torch.set_num_threads(1)
    res = instructions() if a.ir else timed("cpu", a.n, a.rounds)
    unit = "instr" if a.ir else "us"
    res |= derived(res, unit)
    print(json.dumps({k: round(v, 2) for k, v in res.items()}))


if __name__ == "__main__":
    main()
