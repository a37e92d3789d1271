"""Runtime integrity in the candidate process: operator and kernel accounting, decoys, hygiene.

`inspect_forward` runs `ModelNew.forward` (after correctness passed, before timing) under
- `AtenRecorder`: every ATen operator, compute vs allocation/view/copy/reshape;
- `LaunchHooks`: every launch of the candidate's own Triton / CUDA kernels, so an own kernel is
  seen running under the Triton interpreter on CPU too;
- on a GPU, the torch profiler: every kernel launched, own (a name the candidate defined) vs
  library, and the own kernels' share of GPU time;
then re-runs it with each own kernel's outputs poisoned to find decoys (`decoy.find_decoys`).

Policies: `strict` forbids any PyTorch compute operator; `partial` (KernelBench's rules) allows
them for parts. Both require at least one own kernel to run and every own kernel to feed the result.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import torch
from torch import nn

from kiln.tools.integrity.accounting import AtenRecorder
from kiln.tools.integrity.decoy import find_decoys
from kiln.tools.integrity.hygiene import check_outputs as _check_outputs
from kiln.tools.integrity.launches import EXT, CountingObserver, LaunchHooks
from kiln.tools.records import Finding, OpAccounting

__all__ = ["inspect_forward", "check_outputs"]

check_outputs = _check_outputs


def inspect_forward(model_new: nn.Module, inputs: tuple, *, policy: str, device: str) -> tuple[OpAccounting, list[Finding]]:
    """Account for one forward and judge it under `policy` ('strict' or 'partial')."""
    roots = candidate_roots(model_new)
    counter = CountingObserver()
    hooks = LaunchHooks(counter, roots)
    recorder = AtenRecorder(hooks, counter.snapshots)
    args = _clone(inputs)
    with hooks, recorder, torch.no_grad():
        first = model_new(*args)
    kernels = sorted(n for n in counter.counts if not n.startswith(EXT))
    acc = OpAccounting(aten_ops=dict(sorted(recorder.counts.items())), compute_ops=recorder.compute_ops,
                       own_launches=dict(counter.counts), own_kernels=kernels, method="launch hooks")
    profiled = False
    if device == "cuda" and torch.cuda.is_available():
        try:
            _profile_into(acc, model_new, inputs, roots)
            profiled = True
        except Exception as exc:  # noqa: BLE001 - a profiler failure is the harness's, not the candidate's
            acc.method = f"launch hooks (profiler unavailable: {type(exc).__name__}: {str(exc)[:120]})"
    if not profiled and not kernels:  # no profile: the candidate's own C++ host code counts as its own work
        acc.own_kernels = sorted(counter.counts)
    if counter.counts:
        acc.decoy_kernels = find_decoys(model_new, inputs, sorted(counter.counts), roots, first,
                                        deterministic=device != "cuda")
    acc.decoy_kernels += [f"{n} (returns the output of {op} unchanged)" for n, op in sorted(counter.torch_results.items())]
    return acc, judge(acc, policy)


def judge(acc: OpAccounting, policy: str) -> list[Finding]:
    """Findings from an accounting record under a policy."""
    out: list[Finding] = []
    if not acc.own_kernels:
        ops = ", ".join(acc.compute_ops[:6]) or "no compute at all"
        out.append(Finding(rule="runtime.no-own-kernel", severity="reject",
                           evidence=f"no kernel of the candidate's own ran during forward ({acc.method}); "
                                    f"PyTorch ops: {ops}"))
    if acc.compute_ops:
        sev = "reject" if policy == "strict" else "info"
        out.append(Finding(rule="runtime.torch-compute", severity=sev,
                           evidence=f"PyTorch compute ops in forward: {', '.join(acc.compute_ops[:10])}"
                                    + (" (forbidden under the strict policy)" if policy == "strict" else "")))
    poisoned = [d for d in acc.decoy_kernels if "returns the output of" not in d]
    untouched = [d for d in acc.decoy_kernels if "returns the output of" in d]
    if poisoned:
        out.append(Finding(rule="runtime.decoy", severity="reject",
                           evidence=f"kernel(s) {', '.join(poisoned)} ran, but overwriting their output right "
                                    "after each launch (with -2x+1, then with 7.0) left the result within tolerance: "
                                    "their work does not reach the output"))
    if untouched:
        out.append(Finding(rule="runtime.decoy", severity="reject",
                           evidence=f"extension function(s) {', '.join(untouched)}: the result is PyTorch's, "
                                    "no kernel of the candidate's own touched it"))
    return out


def candidate_roots(model_new: nn.Module) -> list[Any]:
    """The model and the module its class was defined in (where extension modules live)."""
    roots: list[Any] = [model_new]
    mod = sys.modules.get(type(model_new).__module__)
    if mod is not None:
        roots.append(mod)
    return roots


def own_kernel_names(roots: list[Any]) -> set[str]:
    """Names the candidate defined: Triton functions and `__global__` functions in its sources."""
    names: set[str] = set()
    for root in roots:
        for value in (vars(root).values() if hasattr(root, "__dict__") else []):
            fn = getattr(value, "fn", None)
            if fn is not None and hasattr(value, "run"):
                names.add(getattr(fn, "__name__", ""))
            if isinstance(value, str) and "__global__" in value:
                names |= set(_GLOBAL_FN.findall(value))
            if type(value).__name__ == "CudaKernel":
                names.add(str(getattr(value, "name", "")))
        names |= set(_GLOBAL_FN.findall(_source_text(root)))
    return {n for n in names if len(n) >= 3}


_GLOBAL_FN = re.compile(r"__global__\s+(?:[\w:<>]+\s+)*?(\w+)\s*\(")


def _source_text(root: Any) -> str:
    """The candidate's own file, wherever in it the kernel sources live (locals, class bodies)."""
    path = str(getattr(root, "__file__", "") or "")
    if not path.endswith(".py"):
        return ""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError:
        return ""


def is_own_kernel(kernel: str, own_names: set[str]) -> bool:
    """Is a profiled kernel one of the candidate's? Matched as a whole function name (plain, as
    `name(...)` / `name<...>` after `void `, or Itanium-mangled `_Z<len><name>`), never inside a
    namespace, so naming a kernel `gemm` or `elementwise_kernel` doesn't claim library kernels."""
    for n in own_names:
        if kernel == n or re.search(rf"_Z{len(n)}{re.escape(n)}", kernel):
            return True
        if re.search(rf"(?:^|[\s*&])(?<!::){re.escape(n)}\s*[(<]", kernel):
            return True
    return False


def _profile_into(acc: OpAccounting, model_new: nn.Module, inputs: tuple, roots: list[Any]) -> None:
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    own_names = own_kernel_names(roots) | set(acc.own_kernels)
    args = _clone(inputs)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof, torch.no_grad():
        model_new(*args)
        torch.cuda.synchronize()
    own_us = lib_us = 0.0
    own, lib = set(), set()
    for e in prof.events():
        if e.device_type != DeviceType.CUDA:
            continue
        us = float(e.time_range.elapsed_us())
        if is_own_kernel(e.name, own_names):
            own.add(e.name)
            own_us += us
        else:
            lib.add(e.name)
            lib_us += us
    acc.library_kernels = sorted(lib)
    acc.own_time_us, acc.library_time_us = own_us, lib_us
    acc.own_time_share = own_us / (own_us + lib_us) if own_us + lib_us > 0 else None
    acc.method = "launch hooks + torch profiler"
    if own and not acc.own_kernels:  # own kernels launched from C++ (load_inline) show up here only
        acc.own_kernels = sorted(own)


def _clone(inputs: tuple) -> list[Any]:
    return [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
