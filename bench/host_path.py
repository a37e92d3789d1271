"""The patch runtime's host path on this machine (issue 24): per call of a group norm -> SiLU pair on a
tiny CPU tensor (2 x 8 x 4 x 4, two stock modules in one parent), eager against patched with a kernel
that costs nothing (the runtime's own path: guards, placeholder, kernel wrapper), and the same for a
single patched group norm. `*_shell` is the same parent with Identity modules (the module calls and
attribute reads every variant pays); `*_eager_ops` and `*_runtime` are eager and patched less it.

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
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from kiln.evals.model import profile
from kiln.evals.model.apply import apply_entries
from kiln.evals.model.patch import Kernel, Site
from kiln.evals.model.records import BundleEntry


class Same(nn.Module):
    """A kernel that costs nothing: what is left is the runtime's path."""

    def __init__(self, *params: Any) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, *rest: Any) -> torch.Tensor:
        return x


class Pair(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm, self.act = nn.GroupNorm(4, 8), nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.norm(x))


class PairFunctional(Pair):
    """The tail as a functional call on the placeholder (`F.silu(self.norm(x))`): its own handler."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.norm(x))


class Single(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.GroupNorm(4, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def _patched(model: nn.Module, x: torch.Tensor, kind: str) -> Any:
    prof = profile.profile_model(model, [lambda: model(x)], "cpu", "float32")
    g = next(g for g in prof.groups if g.kind == kind and g.sig.op == "F.group_norm")
    entry = BundleEntry(group=g.id, kind=kind, sig=g.sig, tail=g.tail, kernel="", scopes=g.scopes,
                        module_paths=g.module_paths)
    site = Site(entry, Kernel(types.SimpleNamespace(ModelNew=Same), (g.tail or g.sig).out, f"host_path_{kind}"))
    return apply_entries(model, [site], compile_kernels=False)


def cases() -> dict[str, Callable[[], Any]]:
    """name -> one call (no_grad is entered by the caller)."""
    torch.manual_seed(0)
    x = torch.randn(2, 8, 4, 4)
    pe, pp, se, sp, shell, single_shell = Pair().eval(), Pair().eval(), Single().eval(), Single().eval(), Pair(), Single()
    shell.norm, shell.act, single_shell.norm = nn.Identity(), nn.Identity(), nn.Identity()
    pf = PairFunctional().eval()
    with torch.no_grad():
        _patched(pp, x, "fused")
        _patched(pf, x, "fused")
        _patched(sp, x, "function")
    return {"eager_pair": lambda: pe(x), "patched_pair_free": lambda: pp(x), "patched_pair_functional": lambda: pf(x),
            "eager_single": lambda: se(x), "patched_single_free": lambda: sp(x),
            "pair_shell": lambda: shell(x), "single_shell": lambda: single_shell(x)}


def derived(res: dict[str, float], unit: str) -> dict[str, float]:
    """The ops' own cost and the runtime's: each case less its shell (the same modules as Identity: the
    module calls and attribute reads both pay)."""
    out = dict(res)
    for kind in ("pair", "single"):
        shell = res[f"{kind}_shell_{unit}"]
        out[f"{kind}_eager_ops_{unit}"] = res[f"eager_{kind}_{unit}"] - shell
        out[f"{kind}_runtime_{unit}"] = res[f"patched_{kind}_free_{unit}"] - shell
    return out


def timed(n: int, rounds: int) -> dict[str, float]:
    """Median over `rounds` interleaved rounds of us per call (n calls a round)."""
    torch.set_num_threads(1)
    cs = cases()
    samples: dict[str, list[float]] = {k: [] for k in cs}
    with torch.no_grad():
        for fn in cs.values():
            for _ in range(200):
                fn()
        for _ in range(rounds):
            for k, fn in cs.items():
                t0 = time.perf_counter_ns()
                for _ in range(n):
                    fn()
                samples[k].append((time.perf_counter_ns() - t0) / n / 1e3)
    return {f"{k}_us": statistics.median(v) for k, v in samples.items()}


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
    for line in path.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
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
    res = derived(instructions(), "instr") if a.ir else derived(timed(a.n, a.rounds), "us")
    print(json.dumps({k: round(v, 2) for k, v in res.items()}))


if __name__ == "__main__":
    main()
