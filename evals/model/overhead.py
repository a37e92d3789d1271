"""Where a patched call's time goes on this machine: the patch runtime's host costs, measured.

    python -m kiln.evals.model.overhead          # one JSON line (bench/model_bench.py --part overhead)

- `passthrough_us`: an op inside a patched scope that no kernel takes (the TorchFunctionMode's set
  lookup), minus the same op outside;
- `guard_us`: the guard of a call that matches (argument order, shapes, dtypes, strides, values);
- the runtime's layers, kernel left out (any device): `scope_us` (entering and leaving a patched
  scope), `runtime_call_us` (a whole patched call whose kernel returns its input: scope, dispatch,
  guard, kernel wrapper), `instance_us` (the kernel wrapper's per-call instance key, two
  parameters), `fused_pair_us` (a group norm -> SiLU pair through its placeholder, kernel left
  out), `lean_kind_us` (the lean launcher's key for the SiLU launch);
- with the lean launcher, `lean_stub_us`: one lean launch with the compiled kernel's launcher
  replaced by a no-op (key, hook checks, argument fill: the launcher's own C call left out);
- the host path case by case (`hostpath.py`, any device): a fused group norm -> SiLU pair of stock
  modules (`pair_runtime_us`: patched with a free kernel, less the same parent with Identity modules;
  `pair_eager_ops_us`: eager's own two ops), the pair with a functional tail, a single op; the same as
  Python and C call counts (`*_py_calls`, `*_c_calls`: they do not move with the load), and
  `spare_kept` (a pair's forwards reuse one placeholder);
- per forward of the SD ResBlocks (examples/model/sd_resblock.py, small): eager, patched with their
  group norm -> SiLU pairs fused into a free kernel, the pairs' own eager host time, and
  `forward_runtime_us`: what the runtime costs a forward (patched - eager + pairs);
- per-call host time of a small SiLU: eager, the built-in kernel launched by Triton, the same kernel
  through the lean launcher, and the whole patched path (mode, guard, kernel wrapper, launch);
- the SD-size group norm + SiLU, eager against the built-in fused kernel: kernel time (torch.profiler)
  and back-to-back calls (CUDA events over a loop: whichever of host and GPU is slower).
Host figures are per call over many calls of a tiny tensor (the GPU keeps up, so the host is what is
timed).
"""

from __future__ import annotations

import json
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from kiln.evals.model import hostpath, launch, profile
from kiln.evals.model.apply import apply_entries
from kiln.evals.model.patch import Kernel, Site, load_kernel_module
from kiln.evals.model.records import BundleEntry

SILU = ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        return F.silu(x)\n\ndef get_inputs():\n    return [torch.randn({shape})]\n\n"
        "def get_init_inputs():\n    return []\n")
GN_SILU = ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nclass Model(nn.Module):\n"
           "    def __init__(self):\n        super().__init__()\n        self.norm = nn.GroupNorm(32, 320, eps=1e-6)\n\n"
           "    def forward(self, x):\n        return F.silu(self.norm(x))\n\ndef get_inputs():\n"
           "    return [torch.randn(2, 320, 64, 64)]\n\ndef get_init_inputs():\n    return []\n")


def host_us(fn: Callable[[], Any], n: int, device: str) -> float:
    """Host microseconds per call of fn() over n calls (after warm-up)."""
    for _ in range(20):
        fn()
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    us = (time.perf_counter() - t0) * 1e6 / n
    sync()
    return us


def gpu_us(fn: Callable[[], Any], n: int = 200) -> float:
    for _ in range(10):
        fn()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3 / n


class Chain(nn.Module):
    """`n` adds in one forward: the ops a patched scope passes through."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def forward(self, x):
        for _ in range(self.n):
            x = x + 1
        return x


class Act(nn.Module):
    def forward(self, x):
        return F.silu(x)


class Same(nn.Module):
    """A 'kernel' that costs nothing: the patch runtime's own cost is what is left."""

    def __init__(self, *params: Any) -> None:
        super().__init__()

    def forward(self, x, *rest):
        return x


class GnSilu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.GroupNorm(4, 8)

    def forward(self, x):
        return F.silu(self.norm(x))


def builtin_kernel(problem: str, folder: Path, device: str) -> Any:
    """The built-in Coder's first kernel for a problem source, imported as a module."""
    from kiln.agents.base import CoderTask
    from kiln.agents.builtin import BuiltinCoder

    reply = BuiltinCoder(device=device).write(CoderTask(mode="generate", problem_name="p", problem_src=problem))
    if not reply.ok or not reply.source:
        raise RuntimeError(f"the built-in Coder wrote no kernel: {reply.error}")
    path = folder / f"k{abs(hash(problem)) % 10**8}.py"
    path.write_text(reply.source)
    return load_kernel_module(path)


def site_for(model: nn.Module, x: torch.Tensor, module: Any, name: str) -> Site:
    prof = profile.profile_model(model, [lambda: model(x)], "cpu", "float32")
    g = next(g for g in prof.groups if g.sig.op == "F.silu")
    entry = BundleEntry(group=g.id, kind="function", sig=g.sig, kernel="", scopes=g.scopes, module_paths=g.module_paths)
    return Site(entry, Kernel(types.SimpleNamespace(ModelNew=module.ModelNew), g.sig.out, name))


def passthrough(device: str, n_ops: int = 200, reps: int = 200) -> dict[str, float]:
    x = torch.ones(8, device=device)
    chain = Chain(n_ops)
    eager = host_us(lambda: chain(x), reps, device)
    silu_site = site_for(Act(), x, types.SimpleNamespace(ModelNew=Act), "overhead_probe_pass")
    silu_site.entry = silu_site.entry.model_copy(update={"scopes": [""]})
    with torch.no_grad(), apply_entries(chain, [silu_site], compile_kernels=False):
        patched = host_us(lambda: chain(x), reps, device)
    values = silu_site.guard.values((x, False), {})  # F.silu hands the mode its inplace=False too
    guard = host_us(lambda: silu_site.guard.ok(values), 20000, "cpu")
    return {"passthrough_us": (patched - eager) / n_ops, "guard_us": guard, "op_us": eager / n_ops}


def layers(device: str) -> dict[str, float]:
    """The runtime's layers with a kernel that costs nothing (module docstring)."""
    x = torch.ones(4096, device=device)
    act, scope = Act(), apply_entries(nn.Identity(), [], compile_kernels=False)
    site = site_for(act, x, types.SimpleNamespace(ModelNew=Same), "overhead_probe_same")
    kern, w = Kernel(types.SimpleNamespace(ModelNew=Same), None, "overhead_probe_inst"), torch.ones(8, device=device)
    args, kw = (x, x, 4096), {"BLOCK": 2048, "num_warps": 8, "num_stages": 1}
    out = {"scope_us": host_us(lambda: scope.call(int, (), {}), 20000, "cpu"),
           "instance_us": host_us(lambda: kern.instance([w, w]), 20000, "cpu"),
           "lean_kind_us": host_us(lambda: launch.kind((2,), 0, args, kw), 20000, "cpu")}
    with torch.no_grad(), apply_entries(act, [site], compile_kernels=False):
        out["runtime_call_us"] = host_us(lambda: act(x), 5000, device)
    gn, xg = GnSilu().to(device).eval(), torch.randn(2, 8, 4, 4, device=device)
    prof = profile.profile_model(gn, [lambda: gn(xg)], "cpu" if device == "cpu" else device, "float32")
    g = next(g for g in prof.groups if g.kind == "fused")
    entry = BundleEntry(group=g.id, kind="fused", sig=g.sig, tail=g.tail, kernel="", scopes=g.scopes,
                        module_paths=g.module_paths)
    fused = Site(entry, Kernel(types.SimpleNamespace(ModelNew=Same), g.tail.out, "overhead_probe_fused"))
    with torch.no_grad(), apply_entries(gn, [fused], compile_kernels=False) as h:
        out["fused_pair_us"] = host_us(lambda: gn(xg), 5000, device)
        if not h.table.calls.get(g.id):
            raise RuntimeError("the fused group norm -> SiLU pair never ran as one kernel")
    return out


SD_RESBLOCK = Path(__file__).resolve().parents[2] / "examples" / "model" / "sd_resblock.py"


def per_forward(device: str, reps: int = 5) -> dict[str, float]:
    """The SD ResBlocks (`make_small`: tiny tensors, so the host is what is timed) per forward: eager,
    and patched with every group norm -> SiLU pair fused into a kernel that costs nothing; the pairs'
    own eager host time; the runtime's cost per forward is patched - (eager - pairs). Best of `reps`
    alternating runs."""
    from kiln.evals.model.targets import from_file

    if not SD_RESBLOCK.exists():
        return {}
    model, (x, temb) = from_file(str(SD_RESBLOCK), "make_small")
    model, x, temb = model.to(device).eval(), x.to(device), temb.to(device)
    prof = profile.profile_model(model, [lambda: model(x, temb)], device, "float32")
    g = next(g for g in prof.groups if g.kind == "fused" and g.sig.op == "F.group_norm")
    entry = BundleEntry(group=g.id, kind="fused", sig=g.sig, tail=g.tail, kernel="", scopes=g.scopes,
                        module_paths=g.module_paths)
    site = Site(entry, Kernel(types.SimpleNamespace(ModelNew=Same), g.tail.out, "overhead_probe_forward"))
    norms = [(b.norm1, b.nonlinearity, x) for b in model.blocks] + [(b.norm2, b.nonlinearity, x) for b in model.blocks]
    eager, patched = [], []
    with torch.no_grad():
        pairs = sum(host_us(lambda n=n, a=a, t=t: a(n(t)), 500, device) for n, a, t in norms)
        h = apply_entries(model, [site], compile_kernels=False)
        for _ in range(reps):
            h.remove()
            eager.append(host_us(lambda: model(x, temb), 300, device))
            h.install()
            patched.append(host_us(lambda: model(x, temb), 300, device))
        h.remove()
    if h.table.calls.get(g.id, 0) == 0:
        raise RuntimeError("the SD ResBlocks' group norm -> SiLU pairs never ran fused")
    out = {"forward_eager_us": min(eager), "forward_patched_free_us": min(patched), "forward_pairs_eager_us": pairs}
    out["forward_runtime_us"] = out["forward_patched_free_us"] - out["forward_eager_us"] + pairs
    return out


def lean_stub_us(mod: Any, x: torch.Tensor) -> float:
    """One lean launch of the SiLU kernel with its launcher a no-op (after a real launch made the plan)."""
    lk = next(v for v in vars(mod).values() if isinstance(v, launch.LeanKernel) and v.plans)
    lk = launch.LeanKernel(lk.jit)
    out, args, kw = torch.empty_like(x), (x, x.numel()), {"BLOCK": 2048, "num_warps": 8, "num_stages": 1}
    lk[(2,)](out, *args, **kw)
    for plan in lk.plans.values():
        plan.kernel = types.SimpleNamespace(run=lambda *a: None, function=None, packed_metadata=None)
    us = host_us(lambda: lk.launch((2,), out, *args, **kw), 5000, "cpu")
    if not lk.lean_calls:
        raise RuntimeError(f"the lean launcher never took its own path: {lk.broken}")
    return us


def small_call(device: str, folder: Path) -> dict[str, float]:
    """Host us per call of a 4096-element SiLU: eager, kernel (Triton launch), kernel (lean), patched."""
    x = torch.randn(4096, device=device)
    mod = builtin_kernel(SILU.format(shape="4096"), folder, device)
    k = mod.ModelNew().to(device)
    out = {"eager_silu_us": host_us(lambda: F.silu(x), 2000, device),
           "kernel_triton_us": host_us(lambda: k(x), 2000, device)}
    if launch.lean(mod):
        out["kernel_lean_us"] = host_us(lambda: k(x), 2000, device)
        out["lean_stub_us"] = lean_stub_us(mod, x)
    act = Act()
    site = site_for(act, x, mod, "overhead_probe_silu")
    with torch.no_grad(), apply_entries(act, [site], compile_kernels=False) as h:
        out["patched_call_us"] = host_us(lambda: act(x), 2000, device)
        out["patched_calls"] = float(h.table.calls.get(site.entry.group, 0))
    return out


def kernel_us(fn: Callable[[], Any], n: int = 20) -> float:
    """GPU kernel time per call (torch.profiler's kernel durations: launch gaps and host time left out)."""
    from kiln.evals.model.gputime import profile_forward

    fn()
    return profile_forward(lambda: [fn() for _ in range(n)], reps=1).total_us / n


def fused_gn_silu(folder: Path) -> dict[str, float]:
    """The SD UNet block's size (2 x 320 x 64 x 64, 32 groups, fp32): eager group norm + SiLU against the
    built-in fused kernel, as GPU kernel time and as back-to-back calls (what a loop of calls sees)."""
    x = torch.randn(2, 320, 64, 64, device="cuda")
    norm = nn.GroupNorm(32, 320, eps=1e-6).cuda()
    mod = builtin_kernel(GN_SILU, folder, "cuda")
    k = mod.ModelNew().cuda()
    with torch.no_grad():  # both GroupNorms keep their default affine (weight 1, bias 0)
        def eager() -> Any:
            return F.silu(norm(x))
        out = {"gn_silu_eager_kernel_us": kernel_us(eager), "gn_silu_fused_kernel_us": kernel_us(lambda: k(x)),
               "gn_silu_eager_loop_us": gpu_us(eager), "gn_silu_fused_loop_us": gpu_us(lambda: k(x)),
               "gn_silu_max_abs_err": float((k(x) - eager()).abs().max())}
    if not out["gn_silu_fused_kernel_us"] > 0:
        raise RuntimeError("torch.profiler listed no kernel time for the fused group norm + SiLU")
    out["gn_silu_speedup"] = out["gn_silu_eager_kernel_us"] / out["gn_silu_fused_kernel_us"]
    out["gn_silu_loop_speedup"] = out["gn_silu_eager_loop_us"] / out["gn_silu_fused_loop_us"]
    return out


def host_path(device: str) -> dict[str, Any]:
    """`hostpath.py`'s figures: timed (us, the runtime's and eager's own), counted, and the spare."""
    out: dict[str, Any] = hostpath.derived(hostpath.timed(device, 2000, 7), "us")
    return out | hostpath.host_calls() | {"spare_kept": hostpath.spare_kept()}


def probe() -> dict[str, Any]:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    out: dict[str, Any] = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
                           "torch": torch.__version__, "lean_available": launch.available()}
    out |= passthrough(device)
    out |= layers(device)
    out |= host_path(device)
    out |= per_forward(device)
    if device == "cuda":
        with tempfile.TemporaryDirectory(prefix="kiln-overhead-") as tmp:
            out |= small_call(device, Path(tmp))
            out |= fused_gn_silu(Path(tmp))
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()}


if __name__ == "__main__":
    print(json.dumps(probe()))
