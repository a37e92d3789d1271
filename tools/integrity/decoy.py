"""Decoy detection: does each own kernel's output actually feed the result?

For each own kernel, the forward is re-run with that kernel's outputs poisoned right after every
launch of it: with an affine flip (-2x + 1), then with a constant fill (7.0). Finite poisons, not
NaN: `0 * y` and `tl.maximum(y, 0)` would swallow or propagate NaN in ways that say nothing about
whether `y` matters. A kernel's outputs are the tensor arguments its launch changed (all of its
arguments other than the forward's inputs and the model's parameters when it changed none, since
a fresh buffer may already hold the right values) plus, for extension functions, what they return.
If no poison moves the final output by more than the correctness tolerance of its dtype
(fp32 1e-4, half types 1e-2, plus ten times the run-to-run noise), the kernel is a decoy: its
output does not matter to the result the harness checks.
A third poison, a huge fill (sqrt of the dtype's largest value), covers statistics kept only for
numerical stability: a row max that a log-softmax subtracts and adds back cancels out for any
moderate value, and only an overflow shows that the result depends on it. It counts only when a
later own kernel read the poisoned tensor, so a decoy mixed into a PyTorch result with a tiny
weight (`torch.relu(x) + 1e-6 * y`) is still a decoy.
Integer and bool outputs (argmax indices, masks) are poisoned too, inside the values they hold, so a
later kernel that indexes with them stays in bounds (an out-of-range index on a GPU is an illegal
address that takes the worker's CUDA context down): the flip maps v to min + max - v, the fill
writes min (or max where min is everywhere), bools are negated and then cleared; there is no huge
fill for them. An output whose values are all one integer can't be moved inside its range and
stays unpoisoned.
Model state the poison touched (buffers or caches that existed before the forward) is restored.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from kiln.tools import chunked
from kiln.tools.integrity.accounting import AtenRecorder, _sid
from kiln.tools.integrity.launches import LaunchHooks

MAX_KERNELS = 8
SNAPSHOT_MAX_BYTES = 2 << 30


MODES = ("flip", "fill", "huge")


class _Poisoner:
    def __init__(self, target: str, mode: str, protected: set[int]) -> None:
        self.target, self.mode, self.protected = target, mode, protected
        self.recorder: AtenRecorder | None = None
        self.saved: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.poisoned: set[int] = set()
        self.consumed = False  # a later own launch read a poisoned tensor

    def before(self, name: str, tensors: list[torch.Tensor]) -> list[torch.Tensor] | None:
        self.consumed |= any(_sid(t) in self.poisoned for t in tensors)
        if name != self.target or sum(t.numel() * t.element_size() for t in tensors) > SNAPSHOT_MAX_BYTES:
            return None
        return [t.detach().clone() for t in tensors]

    def after(self, name: str, tensors: list[torch.Tensor], state: Any, result: Any) -> None:
        if name != self.target:
            return
        candidates = [t for t in tensors if _sid(t) not in self.protected]
        written = [t for t, c in zip(tensors, state or [], strict=False) if not chunked.same_bits(t, c)]
        written = [t for t in written if _sid(t) not in self.protected] or candidates
        written += [t for t in tree_flatten(result)[0] if isinstance(t, torch.Tensor)]
        for t in written:
            if t.numel() and not t.is_complex():
                self._poison(t)

    def _poison(self, t: torch.Tensor) -> None:
        fresh = self.recorder.fresh if self.recorder else set()
        if not t.is_floating_point() and self.mode == "huge":
            return  # no stability statistics in integers
        with torch.no_grad():
            if _sid(t) not in fresh:
                self.saved.append((t, t.detach().clone()))
            if not t.is_floating_point():
                _poison_discrete(t, self.mode)
            elif self.mode == "fill":
                t.fill_(7.0)
            elif self.mode == "huge":
                t.fill_(torch.finfo(t.dtype).max ** 0.5)
            else:
                t.mul_(-2.0).add_(1.0)
        self.poisoned.add(_sid(t))

    def restore(self) -> None:
        with torch.no_grad():
            for t, c in reversed(self.saved):
                t.copy_(c)
        self.saved.clear()


def _poison_discrete(t: torch.Tensor, mode: str) -> None:
    """An integer or bool tensor moved inside the values it holds (see the module's docstring)."""
    if t.dtype == torch.bool:
        t.logical_not_() if mode == "flip" else t.fill_(False)
        return
    lo, hi = int(t.min()), int(t.max())
    if mode == "flip":
        t.neg_().add_(lo + hi)  # v -> lo + hi - v: in [lo, hi], so no index goes out of bounds
    else:
        t.fill_(lo if bool((t != lo).any()) else hi)


def find_decoys(model: torch.nn.Module, inputs: tuple, kernels: list[str], roots: list[Any],
                first: Any = None, *, deterministic: bool = False) -> list[str]:
    """Names of own kernels whose outputs don't reach the result. `first`: the output of an
    earlier plain forward on the same inputs, if any. `deterministic` (CPU: the Triton interpreter
    and CPU torch are): skip measuring run-to-run noise and use `first` as the baseline."""
    again = _outputs(first) if first is not None else _forward(model, inputs)
    if deterministic:
        base, noise = again, 0.0
    else:
        base = _forward(model, inputs)
        noise = _max_diff(base, again)
    decoys = []
    for name in kernels[:MAX_KERNELS]:
        if not any(_feeds(model, inputs, name, mode, base, noise, roots) for mode in MODES):
            decoys.append(name)
    return decoys


def _feeds(model: torch.nn.Module, inputs: tuple, name: str, mode: str, base: list[torch.Tensor],
           noise: float, roots: list[Any]) -> bool:
    args = _clone(inputs)
    protected = {_sid(t) for t in args if isinstance(t, torch.Tensor)}
    protected |= {_sid(p) for p in list(model.parameters()) + list(model.buffers())}
    poisoner = _Poisoner(name, mode, protected)
    hooks = LaunchHooks(poisoner, roots)
    recorder = AtenRecorder(hooks)
    poisoner.recorder = recorder
    try:
        with hooks, recorder:
            out = _forward(model, args, clone=False)
    except Exception:  # noqa: BLE001 - the poisoned output broke what consumed it: it feeds the result
        return mode != "huge" or poisoner.consumed
    finally:
        poisoner.restore()
    return _moved(base, out, noise) and (mode != "huge" or poisoner.consumed)


def _clone(inputs: Any) -> list[Any]:
    return [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]


def _forward(model: torch.nn.Module, inputs: Any, *, clone: bool = True) -> list[torch.Tensor]:
    with torch.no_grad():
        out = model(*(_clone(inputs) if clone else inputs))
    return _outputs(out)


def _outputs(out: Any) -> list[torch.Tensor]:
    return [t.detach().clone() for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]


def _moved(base: list[torch.Tensor], out: list[torch.Tensor], noise: float) -> bool:
    """Did the output move by more than the correctness tolerance (and the noise)?"""
    if len(base) != len(out):
        return True
    for b, o in zip(base, out, strict=True):
        if b.shape != o.shape or b.dtype != o.dtype:
            return True
        if not b.is_floating_point():
            if not chunked.same_bits(b, o):
                return True
            continue
        tol = 1e-4 if b.dtype in (torch.float32, torch.float64) else 1e-2
        if chunked.moved(b, o, tol, 10 * noise):
            return True
    return False


def _max_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    """Largest difference between two output lists; inf when shapes or NaN patterns differ."""
    if len(a) != len(b):
        return float("inf")
    worst = 0.0
    for x, y in zip(a, b, strict=True):
        if x.shape != y.shape or x.dtype != y.dtype:
            return float("inf")
        if not x.is_floating_point():
            if not chunked.same_bits(x, y):
                return float("inf")
            continue
        worst = max(worst, chunked.max_abs_diff(x, y))
    return worst
