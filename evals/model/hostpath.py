"""The patch runtime's host path, case by case (issue 24): a group norm -> SiLU pair of stock modules on a
tiny tensor (2 x 8 x 4 x 4) in one parent, eager and patched with a kernel that costs nothing (so what
is left is the runtime: guards, placeholder, kernel wrapper, scope), the same pair with a functional
tail (`F.silu(self.norm(x))`: the placeholder's own handler), and a single patched group norm; each
with its *shell* (the same parent with Identity modules: the module calls and attribute reads that
eager and patched both pay).

`timed()` times them (interleaved rounds, medians) and `host_calls()` counts the Python and C
function calls of one call of each (`sys.setprofile`); `derived()` gives the runtime's figure (the
patched case less its shell) and eager's own (eager less the shell). Counts do not move with the
machine's load (timings do), so a test can hold them; `bench/host_path.py` also counts the cases'
instructions under callgrind.
"""

from __future__ import annotations

import statistics
import sys
import time
import types
import weakref
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from kiln.evals.model import profile
from kiln.evals.model.apply import Applied, apply_entries
from kiln.evals.model.patch import Kernel, Site
from kiln.evals.model.records import BundleEntry


class Free(nn.Module):
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
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.norm(x))


class Single(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.GroupNorm(4, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def patched(model: nn.Module, x: torch.Tensor, kind: str, kernel: type = Free) -> tuple[Applied, Site]:
    """`model` profiled on `x` and its group norm site (`kind`: "fused" or "function") patched in."""
    prof = profile.profile_model(model, [lambda: model(x)], x.device.type, "float32")
    g = next(g for g in prof.groups if g.kind == kind and g.sig.op == "F.group_norm")
    entry = BundleEntry(group=g.id, kind=kind, sig=g.sig, tail=g.tail, kernel="", scopes=g.scopes,
                        module_paths=g.module_paths)
    site = Site(entry, Kernel(types.SimpleNamespace(ModelNew=kernel), (g.tail or g.sig).out, f"hostpath_{kind}_{g.id}"))
    return apply_entries(model, [site], compile_kernels=False), site


def cases(device: str = "cpu") -> dict[str, Callable[[], Any]]:
    """name -> one call (the caller enters no_grad)."""
    torch.manual_seed(0)
    x = torch.randn(2, 8, 4, 4, device=device)
    pe, pp, pf, se, sp = (m().to(device).eval() for m in (Pair, Pair, PairFunctional, Single, Single))
    shell, fshell, sshell = Pair(), PairFunctional(), Single()
    shell.norm, shell.act, fshell.norm, sshell.norm = nn.Identity(), nn.Identity(), nn.Identity(), nn.Identity()
    with torch.no_grad():
        patched(pp, x, "fused")
        patched(pf, x, "fused")
        patched(sp, x, "function")
    return {"eager_pair": lambda: pe(x), "patched_pair_free": lambda: pp(x), "pair_shell": lambda: shell(x),
            "patched_pair_functional": lambda: pf(x), "functional_shell": lambda: fshell(x),
            "eager_single": lambda: se(x), "patched_single_free": lambda: sp(x), "single_shell": lambda: sshell(x)}


RUNTIME = {"pair_runtime": ("patched_pair_free", "pair_shell"), "pair_eager_ops": ("eager_pair", "pair_shell"),
           "functional_pair_runtime": ("patched_pair_functional", "functional_shell"),
           "single_runtime": ("patched_single_free", "single_shell"), "single_eager_ops": ("eager_single", "single_shell")}
"""figure -> (case, its shell): the figure is the case less its shell."""


def timed(device: str = "cpu", n: int = 3000, rounds: int = 9) -> dict[str, float]:
    """Median over `rounds` interleaved rounds of us per call (n calls a round), each case in turn."""
    cs = cases(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    samples: dict[str, list[float]] = {k: [] for k in cs}
    with torch.no_grad():
        for fn in cs.values():
            for _ in range(200):
                fn()
        for _ in range(rounds):
            for k, fn in cs.items():
                sync()
                t0 = time.perf_counter_ns()
                for _ in range(n):
                    fn()
                samples[k].append((time.perf_counter_ns() - t0) / n / 1e3)
    return {f"{k}_us": statistics.median(v) for k, v in samples.items()}


def derived(res: dict[str, float], unit: str) -> dict[str, float]:
    """The `RUNTIME` figures from per-case figures (`<case>_<unit>`)."""
    return {f"{what}_{unit}": res[f"{case}_{unit}"] - res[f"{shell}_{unit}"] for what, (case, shell) in RUNTIME.items()}


def calls(fn: Callable[[], Any]) -> tuple[int, int]:
    """(Python calls, C calls) of one `fn()` after two warm-up calls."""
    n = {"call": 0, "c_call": 0}

    def count(frame: Any, event: str, arg: Any) -> None:
        if event in n:
            n[event] += 1

    fn()
    fn()
    sys.setprofile(count)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return n["call"], n["c_call"]


def host_calls() -> dict[str, int]:
    """Python and C calls of one call: the runtime's (patched less shell) and eager's own (eager less
    shell), a fused pair (stock tail and functional tail) and a single op."""
    with torch.no_grad():
        c = {k: calls(fn) for k, fn in cases().items()}
    py = derived({f"{k}_py_calls": float(v[0]) for k, v in c.items()}, "py_calls")
    cc = derived({f"{k}_c_calls": float(v[1]) for k, v in c.items()}, "c_calls")
    return {k: int(v) for k, v in (py | cc).items()}


def spare_kept(forwards: int = 5) -> bool:
    """Whether a patched pair's forwards all defer into the one spare placeholder (no allocation a
    forward once nothing holds the last one)."""
    x, model = torch.randn(2, 8, 4, 4), Pair().eval()
    with torch.no_grad():
        h, site = patched(model, x, "fused")
        model(x)
        first = weakref.ref(site.spare) if site.spare is not None else None  # (a strong one would hold it)
        for _ in range(forwards):
            model(x)
        kept = first is not None and site.spare is first() and h.table.calls.get(site.group) == forwards + 1
        h.remove()
    return kept and site.spare is None
