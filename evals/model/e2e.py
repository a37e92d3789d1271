"""End to end: the patched model against the original, on real inputs over several seeds (per-output
tolerances), and on a GPU its latency with CIs against eager and torch.compile (of the original and of
the patched model), peak memory and coverage.

Rules enforced here, not just reported:
- a group whose kernels make an output miss its tolerance is unpatched (each group tried alone);
- on a GPU each group is measured inside the model and kept only if it does not lose there, and the
  patched model is never slower than the original (`inmodel.py`, `measure.py`). Under torch.compile
  the kernels are kept only if compile of the patched model is faster than compile of the original;
  otherwise the bundle's compile policy is "original" (the compiler sees the same ops).
Every step reads the run's clock: later seeds and optional measurements are left out, and said to
be, when the time budget would not hold.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import torch

from kiln.evals.model.budget import Clock
from kiln.evals.model.bundle import Bundle
from kiln.evals.model.leaves import inputs_for_seed, tensor_leaves
from kiln.evals.model.records import E2ERecord, OutputCheck
from kiln.evals.model.targets import Target

TOL = {"float32": 1e-3, "bfloat16": 3e-2, "float16": 1e-2}


def _rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    a64, b64 = a.double(), b.double()
    return float((a64 - b64).nan_to_num(nan=math.inf).norm() / a64.norm().clamp_min(1e-30))


def _up(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return v.float() if v.is_floating_point() else v
    if isinstance(v, tuple | list):
        return type(v)(_up(x) for x in v)
    if isinstance(v, dict):
        return {k: _up(x) for k, x in v.items()}
    return v


def tolerances(t: Target, base: float) -> dict[str, float]:
    """Per output: the dtype's tolerance, or twice the model's own rounding noise (the bf16/fp16 model
    against an fp32 copy of it on the same inputs) where that is larger: a patched model may differ
    from the original by what its own precision already costs, not more."""
    with torch.no_grad():
        low = tensor_leaves(t.call())
        p = next(t.model.parameters(), None)
        if p is None or p.dtype == torch.float32:
            return {name: base for name, _ in low}
        ref = copy.deepcopy(t.model).float()
        exact = tensor_leaves(ref(*_up(t.args), **_up(t.kwargs)))
    del ref
    return {n: max(base, 2 * _rel_l2(e.float(), a.float())) for (n, a), (_, e) in zip(low, exact, strict=True)}


def compare(seed: int, want: Any, got: Any, tol: float | dict[str, float]) -> list[OutputCheck]:
    out = []
    for (name, a), (_, b) in zip(tensor_leaves(want), tensor_leaves(got), strict=True):
        tol_ = tol.get(name, min(tol.values())) if isinstance(tol, dict) else tol
        if a.shape != b.shape or not a.is_floating_point():
            same = a.shape == b.shape and bool(torch.equal(a, b))
            out.append(OutputCheck(seed=seed, output=name, max_abs_err=0.0 if same else math.inf,
                                   rel_l2_err=0.0 if same else math.inf, tol=tol_, passed=same))
            continue
        diff = (a.double() - b.double()).nan_to_num(nan=math.inf)
        rel = _rel_l2(a, b)
        out.append(OutputCheck(seed=seed, output=name, max_abs_err=float(diff.abs().max()) if diff.numel() else 0.0,
                               rel_l2_err=rel, tol=tol_, passed=rel <= tol_))
    return out


def check_outputs(t: Target, bundle: Bundle, only: set[str], seeds: int, tol: dict[str, float],
                  fits: Callable[[], bool] = lambda: True) -> list[OutputCheck]:
    """Patched against original on `seeds` input sets (seed 0 always; later ones while `fits()`)."""
    checks: list[OutputCheck] = []
    for seed in range(seeds):
        if seed and not fits():
            break
        args, kwargs = inputs_for_seed(t.args, t.kwargs, seed)
        with torch.no_grad():
            want = t.call(args, kwargs)
            with bundle.applied(t.model, only=only):
                got = t.call(args, kwargs)
        checks += compare(seed, want, got, tol)
    return checks


def correct_groups(t: Target, bundle: Bundle, groups: list[str], seeds: int, tol: dict[str, float],
                   fits: Callable[[], bool] = lambda: True) -> tuple[list[str], list[OutputCheck], list[str]]:
    """(groups kept, the checks of the kept set, groups dropped with why)."""
    checks = check_outputs(t, bundle, set(groups), seeds, tol, fits)
    if all(c.passed for c in checks):
        return groups, checks, []
    keep, dropped = [], []
    for g in groups:
        alone = check_outputs(t, bundle, {g}, seeds, tol, fits)
        if all(c.passed for c in alone):
            keep.append(g)
        else:
            worst = max(alone, key=lambda c: c.rel_l2_err)
            dropped.append(f"{g}: output {worst.output} off by {worst.rel_l2_err:.2g} (rel L2) > {worst.tol:.2g}")
    checks = check_outputs(t, bundle, set(keep), seeds, tol, fits) if keep else []
    if not all(c.passed for c in checks):  # kernels fine alone but not together: patch nothing
        dropped += [f"{g}: fails together with the others" for g in keep]
        return [], checks, dropped
    return keep, checks, dropped


def run_e2e(t: Target, bundle: Bundle, groups: list[str], *, seeds: int, tol: float, device: str,
            share: dict[str, float], faster_alone: set[str] | None = None,
            clock: Clock | None = None, baseline: dict | None = None) -> tuple[E2ERecord, list[str]]:
    """The end-to-end record, and the groups that stay patched (see the module docstring)."""
    clock = clock or Clock(None)
    keep, checks, dropped = correct_groups(t, bundle, groups, seeds, tolerances(t, tol),
                                           fits=lambda: clock.left_s() > 5.0)
    rec = E2ERecord(checks=checks, passed=all(c.passed for c in checks), dropped=dropped)
    n_seeds = len({c.seed for c in checks})
    if n_seeds < seeds:
        rec.budget_notes.append(f"outputs checked on {n_seeds} of {seeds} seeds: the time budget ran out")
    if device != "cuda":
        rec.note = "latency not measured: no GPU (kernels ran under the Triton interpreter)"
        rec.coverage = sum(share.get(g, 0.0) for g in keep)
        return _finish(rec, keep)
    from kiln.evals.model.measure import measure_gpu

    keep = measure_gpu(t, bundle, keep, rec, faster_alone=faster_alone if faster_alone is not None
                       else set(groups), clock=clock, baseline=baseline or {})
    rec.measured = True
    rec.coverage = sum(share.get(g, 0.0) for g in keep)
    return _finish(rec, keep)


def _finish(rec: E2ERecord, keep: list[str]) -> tuple[E2ERecord, list[str]]:
    rec.note = (rec.note + "; " if rec.note else "") + f"{len(keep)} group(s) patched"
    return rec, keep
