"""Runtime integrity: operator and kernel accounting, decoys, laundering, hygiene.

`inspect_forward` collects the evidence in the candidate's process: it runs `ModelNew.forward`
(after correctness passed, before timing) under
- `AtenRecorder`: every ATen operator, compute vs allocation/view/copy/reshape, wherever it runs
  (grid callables and launch hooks included);
- `LaunchHooks`: every launch of the candidate's own Triton / CUDA kernels, so an own kernel is
  seen running under the Triton interpreter on CPU too, and `CopyWatch` on each launch (laundering);
- on a GPU, the torch profiler: every kernel launched, own (compiled and launched by the
  candidate, not under an ATen operator; see `own_kernels`) vs library, and the own share of GPU time;
then re-runs it with each own kernel's outputs poisoned to find decoys (`decoy.find_decoys`), and
on negated inputs when it looked laundered (`launder`). `judge` turns the `OpAccounting` record
into findings; the parent calls it on the evidence, never trusting the worker's verdict.

Policies: `strict` forbids any PyTorch compute operator; `partial` (KernelBench's rules) allows
them for parts. Both require at least one own kernel to run, every own kernel to feed the result,
and the own kernels to do more than move a result computed elsewhere.
"""

from __future__ import annotations

import sys
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_flatten

from kiln.tools.integrity.accounting import AtenRecorder, _sid
from kiln.tools.integrity.decoy import find_decoys
from kiln.tools.integrity.hygiene import check_outputs as _check_outputs
from kiln.tools.integrity.launches import EXT, CountingObserver, LaunchHooks, Tee
from kiln.tools.integrity.launder import CopyWatch, ResultLog, laundered
from kiln.tools.integrity.own_kernels import is_own_kernel, own_kernel_names, profile_into
from kiln.tools.integrity.runtime_rules import judge
from kiln.tools.records import Finding, OpAccounting

__all__ = ["inspect_forward", "check_outputs", "is_own_kernel", "judge", "own_kernel_names"]

check_outputs = _check_outputs


def inspect_forward(model_new: nn.Module, inputs: tuple, *, policy: str, device: str) -> tuple[OpAccounting, list[Finding]]:
    """Account for one forward and judge it under `policy` ('strict' or 'partial')."""
    roots = candidate_roots(model_new)
    acc, first, counter, watch = _account(model_new, inputs, roots)
    profiled = False
    if device == "cuda" and torch.cuda.is_available():
        try:
            profile_into(acc, model_new, _clone(inputs), roots)
            profiled = True
        except Exception as exc:  # noqa: BLE001 - a profiler failure is the harness's, not the candidate's
            acc.method = f"launch hooks (profiler unavailable: {type(exc).__name__}: {str(exc)[:120]})"
    if not profiled and not acc.own_kernels:  # no profile: the candidate's own C++ host code counts as its own work
        acc.own_kernels = sorted(counter.counts)
    if counter.counts:
        acc.decoy_kernels = find_decoys(model_new, inputs, sorted(counter.counts), roots, first,
                                        deterministic=device != "cuda")
    acc.decoy_kernels += [f"{n} (returns the output of {op} unchanged)" for n, op in sorted(counter.torch_results.items())]
    if laundered(watch, acc.compute_ops, _tensors(first)):
        acc.copy_kernels = _copy_kernels_on_negated(model_new, inputs, roots)
    return acc, judge(acc, policy)


def _account(model_new: nn.Module, inputs: tuple, roots: list[Any]) -> tuple[OpAccounting, Any, CountingObserver, CopyWatch]:
    """One forward under the operator recorder, the launch hooks and the copy watch."""
    args = _clone(inputs)
    counter, watch = CountingObserver(), CopyWatch(ResultLog(), _protected(model_new, args))
    hooks = LaunchHooks(Tee(counter, watch), roots)
    recorder = AtenRecorder(hooks, counter.snapshots, watch.log)
    with hooks, recorder, torch.no_grad():
        first = model_new(*args)
    kernels = sorted(n for n in counter.counts if not n.startswith(EXT))
    acc = OpAccounting(aten_ops=dict(sorted(recorder.counts.items())), compute_ops=recorder.compute_ops,
                       own_launches=dict(counter.counts), own_kernels=kernels, method="launch hooks")
    return acc, first, counter, watch


def _protected(model: nn.Module, args: list[Any]) -> set[int]:
    """Storages of the forward's inputs and the model's parameters and buffers."""
    ts = [t for t in args if isinstance(t, torch.Tensor)] + list(model.parameters()) + list(model.buffers())
    return {_sid(t) for t in ts}


def _copy_kernels_on_negated(model: nn.Module, inputs: tuple, roots: list[Any]) -> list[str]:
    """Re-run the forward on the negated float inputs: kernels that launder there too. A kernel that
    was the identity only on non-negative inputs (a ReLU) computes here, and is let go."""
    args = [-t if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in _clone(inputs)]
    watch = CopyWatch(ResultLog(), _protected(model, args))
    hooks = LaunchHooks(watch, roots)
    recorder = AtenRecorder(hooks, None, watch.log)
    try:
        with hooks, recorder, torch.no_grad():
            out = model(*args)
    except Exception:  # noqa: BLE001 - no second witness, no finding
        return []
    return laundered(watch, recorder.compute_ops, _tensors(out))


def _tensors(out: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]


def candidate_roots(model_new: nn.Module) -> list[Any]:
    """The model and the module its class was defined in (where extension modules live)."""
    roots: list[Any] = [model_new]
    mod = sys.modules.get(type(model_new).__module__)
    if mod is not None:
        roots.append(mod)
    return roots


def _clone(inputs: tuple) -> list[Any]:
    return [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
