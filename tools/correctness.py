"""Compare a candidate's outputs with the reference's, and explain a mismatch so a Coder can act on it.

Workers `pack` each output (tensor, tuple/list of tensors, numbers) into CPU tensors plus metadata
(original device, dtype, shape, class) and `torch.save` it; the parent loads both files and calls
`compare`. Rules: the structure (count), shape, dtype and device must match; values must satisfy
|actual - expected| <= atol + rtol * |expected|; NaN is allowed only where the reference has NaN.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from kiln.tools import sketch
from kiln.tools.inputs import derive_seed
from kiln.tools.records import Mismatch, MismatchEntry
from kiln.tools.rule import DEFAULT_TOL, first_failure, tolerances

__all__ = ["DEFAULT_TOL", "compare", "first_failure", "leaves", "pack", "tolerances"]

N_FIRST = 5


# ----------------------------------------------------------------------------- packing (worker side)


def leaves(obj: Any, name: str = "out") -> list[tuple[str, Any]]:
    """(name, leaf) pairs of one forward() result, in pack order: tensors and numbers are leaves,
    tuples/lists/dicts are walked ('out[0]', "out['k']"). `kiln.tools.numerics` names outputs the
    same way, so its per-output data lines up with the pack's."""
    if isinstance(obj, (tuple, list)):
        return [leaf for i, item in enumerate(obj) for leaf in leaves(item, f"{name}[{i}]")]
    if isinstance(obj, dict):
        return [leaf for key in sorted(obj, key=str) for leaf in leaves(obj[key], f"{name}[{key!r}]")]
    return [(name, obj)]


def _pack_leaf(name: str, obj: Any, meta: list[dict], tensors: dict[str, Any], seed: int) -> None:
    if isinstance(obj, torch.Tensor):
        meta.append({"name": name, "kind": "tensor", "cls": type(obj).__name__, "device": str(obj.device),
                     "dtype": str(obj.dtype).removeprefix("torch."), "shape": list(obj.shape)})
        if obj.numel() >= sketch.SKETCH_MIN_NUMEL:  # multi-GB outputs: compare a secret-seeded sketch
            tensors[name] = sketch.make_sketch(obj, derive_seed(seed, name))
        else:
            # a plain torch.Tensor copy: a subclass would not survive the parent's weights_only load
            # (its class is in the metadata, and a subclass output fails the comparison as a type)
            tensors[name] = obj.detach().to("cpu", copy=True).contiguous().as_subclass(torch.Tensor)
    elif isinstance(obj, (bool, int, float)) or obj is None:
        meta.append({"name": name, "kind": "number", "value": obj})
    else:
        meta.append({"name": name, "kind": "other", "cls": type(obj).__name__})


def pack(output: Any, seed: int = 0) -> dict[str, Any]:
    """Flatten one forward() result into {'meta': [...], 'tensors': {name: cpu tensor or sketch}}.

    Both sides of a comparison must pack with the same `seed` (the run's secret)."""
    meta: list[dict] = []
    tensors: dict[str, Any] = {}
    for name, leaf in leaves(output):
        _pack_leaf(name, leaf, meta, tensors, seed)
    return {"meta": meta, "tensors": tensors}


def close_in_place(expected: Any, actual: Any, *, atol: float, rtol: float) -> bool | None:
    """Compare two forward() results where they are (on the GPU, no copies, no sketch: every
    element), for re-checks inside one worker. None when the results are not plain tensors /
    sequences of tensors of matching structure: the caller then packs and compares as usual."""
    if isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor):
        if type(actual) is not torch.Tensor or (expected.shape, expected.dtype, expected.device) != \
                (actual.shape, actual.dtype, actual.device):
            return None
        if expected.numel() >= sketch.SKETCH_MIN_NUMEL:  # multi-GB: the whole-tensor temporaries would
            return None  # double the worker's memory; the caller's sketch comparison costs far less
        return compare_tensors(expected.detach(), actual.detach(), atol=atol, rtol=rtol) is None
    if isinstance(expected, (tuple, list)) and type(actual) is type(expected) and len(actual) == len(expected):
        verdicts = [close_in_place(e, a, atol=atol, rtol=rtol) for e, a in zip(expected, actual, strict=True)]
        return None if None in verdicts else all(verdicts)
    return None


# ----------------------------------------------------------------------------- comparison (parent side)


def _desc(m: dict) -> str:
    if m["kind"] == "tensor":
        return f"{m['cls']}{tuple(m['shape'])} {m['dtype']} on {m['device'].split(':')[0]}"
    if m["kind"] == "number":
        return f"number {m['value']!r}"
    return f"a {m.get('cls', '?')} object"


def structure(exp: dict, act: dict) -> Mismatch | None:
    """The first difference in output count, kind, class, shape, dtype or device; None if none."""
    em, am = exp["meta"], act["meta"]
    if len(em) != len(am):
        return Mismatch(output="out", reason="count", expected_desc=f"{len(em)} output(s)",
                        actual_desc=f"{len(am)} output(s)", rule="structure",
                        message=f"forward() returned {len(am)} output value(s); the reference returns {len(em)}.")
    for e, a in zip(em, am, strict=True):
        bad = _meta_mismatch(e, a)
        if bad:
            return bad
    return None


def _meta_mismatch(e: dict, a: dict) -> Mismatch | None:
    name = e["name"]
    if e["kind"] != a["kind"] or e["kind"] == "other" or (a["kind"] == "tensor" and a["cls"] not in ("Tensor", "Parameter")):
        reason = "type"  # "other": an output kiln cannot compare is never silently accepted
    elif e["kind"] != "tensor":
        return None
    elif e["shape"] != a["shape"]:
        reason = "shape"
    elif e["dtype"] != a["dtype"]:
        reason = "dtype"
    elif e["device"].split(":")[0] != a["device"].split(":")[0]:
        reason = "device"
    else:
        return None
    return Mismatch(output=name, reason=reason, expected_desc=_desc(e), actual_desc=_desc(a), rule="structure",
                    message=f"{name}: expected {_desc(e)}, got {_desc(a)} ({reason} differs).")


def compare(exp: dict, act: dict, *, atol: float, rtol: float) -> Mismatch | None:
    """None when every output matches; else the first output that doesn't, with details."""
    bad = structure(exp, act)
    if bad:
        return bad
    for e, a in zip(exp["meta"], act["meta"], strict=True):
        bad = compare_output(e, a, exp, act, atol=atol, rtol=rtol)
        if bad:
            return bad
    return None


def compare_output(e: dict, a: dict, exp: dict, act: dict, *, atol: float, rtol: float) -> Mismatch | None:
    """One output of two packed results whose structure matches (`structure`), by atol/rtol."""
    if e["kind"] == "number":
        if _number_close(e["value"], a["value"], atol, rtol):
            return None
        return Mismatch(output=e["name"], reason="values", expected_desc=repr(e["value"]),
                        actual_desc=repr(a["value"]), n_mismatch=1, n_total=1, mismatch_frac=1.0,
                        message=f"{e['name']}: expected {e['value']!r}, got {a['value']!r}.")
    if e["kind"] != "tensor":
        return None
    et, at = exp["tensors"][e["name"]], act["tensors"][e["name"]]
    if sketch.is_sketch(et) or sketch.is_sketch(at):
        return compare_sketches(et, at, atol=atol, rtol=rtol, name=e["name"])
    return compare_tensors(et, at, atol=atol, rtol=rtol, name=e["name"])


def relative_l2(exp: dict, act: dict) -> float | None:
    """The worst ||actual - expected|| / ||expected|| over the tensor outputs of two packed results
    (a sketch's sampled values stand for its tensor), over elements finite on both sides; None
    when no output has a nonzero reference norm. Elementwise tolerances miss errors that are small
    in absolute terms but large against a small output (atol dominates); this number shows them."""
    worst: float | None = None
    for e in exp["meta"]:
        if e["kind"] != "tensor" or e["name"] not in act["tensors"]:
            continue
        et, at = exp["tensors"][e["name"]], act["tensors"][e["name"]]
        et, at = (et["values"] if sketch.is_sketch(et) else et), (at["values"] if sketch.is_sketch(at) else at)
        if not isinstance(et, torch.Tensor) or not isinstance(at, torch.Tensor) or et.shape != at.shape \
                or not et.is_floating_point():
            continue
        work = _work_dtype(et, at)  # float32 passes, summed in float64 (no float64 copies of big outputs)
        ew, aw = et.to(work), at.to(work)
        both = torch.isfinite(ew) & torch.isfinite(aw)
        if not bool(both.all()):
            ew, aw = ew[both], aw[both]
        norm = float(torch.linalg.vector_norm(ew, dtype=torch.float64))
        if norm > 0.0:
            r = float(torch.linalg.vector_norm(aw - ew, dtype=torch.float64)) / norm
            worst = r if worst is None else max(worst, r)
    return worst


def compare_sketches(e: dict, a: dict, *, atol: float, rtol: float, name: str) -> Mismatch | None:
    """Compare two sketches of a huge output (see kiln.tools.sketch): the sampled values element by
    element, reported at their positions in the full tensor, then whole-tensor NaN/inf counts and
    the sum of |x|."""
    if not (sketch.is_sketch(e) and sketch.is_sketch(a)) or not sketch.same_sampling(e, a):
        return Mismatch(output=name, reason="type", message=f"{name}: the two sides sampled different positions.")
    bad = compare_tensors(e["values"], a["values"], atol=atol, rtol=rtol, name=name)
    if bad is not None:
        return on_full_tensor(bad, e)
    return stats_report(sketch.stats_mismatch(e, a, rtol), e, name)


def on_full_tensor(bad: Mismatch, sk: dict) -> Mismatch:
    """A mismatch found on a sketch's sample, reported at its positions in the full tensor."""
    pos = sketch.sketch_positions(sk)
    for entry in bad.first:
        entry.index = sketch.unravel(int(pos[entry.index[0]]), sk["shape"])
    shape = tuple(sk["shape"])
    bad.expected_desc = bad.actual_desc = str(shape)
    bad.message = (f"{bad.message} (checked on a sample of {bad.n_total} of the output's "
                   f"{math.prod(shape)} elements; indices are in the full tensor)")
    return bad


def stats_report(why: str | None, sk: dict, name: str) -> Mismatch | None:
    """A whole-tensor disagreement of two sketches (`sketch.stats_mismatch`) as a Mismatch."""
    if why is None:
        return None
    shape = str(tuple(sk["shape"]))
    return Mismatch(output=name, reason="nan" if "NaN" in why else "values", expected_desc=shape,
                    actual_desc=shape, n_total=math.prod(sk["shape"]), message=f"{name}: {why}.")


def _number_close(e: Any, a: Any, atol: float, rtol: float) -> bool:
    if e is None or a is None or isinstance(e, bool) or isinstance(a, bool):
        return e == a
    return abs(a - e) <= atol + rtol * abs(e) or (e != e and a != a)


def _work_dtype(e: torch.Tensor, a: torch.Tensor) -> torch.dtype:
    """float32 (bf16/fp16 upcast exactly), float64 when either side is float64."""
    return torch.float64 if torch.float64 in (e.dtype, a.dtype) else torch.float32


def compare_tensors(e: torch.Tensor, a: torch.Tensor, *, atol: float, rtol: float, name: str = "out"
                    ) -> Mismatch | None:
    """|a - e| <= atol + rtol * |e| elementwise (equal values, infinities included, and NaN facing
    NaN also pass), with a report when it fails. A few passes over memory in float32, so large
    outputs compare fast; the NaN/inf refinement only runs when the plain test fails."""
    if e.dtype == torch.bool or not e.is_floating_point():
        ok = torch.eq(e, a)
        ew, aw = e.double(), a.double()
    else:
        work = _work_dtype(e, a)
        ew, aw = e.to(work), a.to(work)
        # an infinite reference allows no tolerance (inf <= inf would pass any finite value): only itself
        ok = (aw - ew).abs_() <= ew.abs().mul_(rtol).add_(atol).nan_to_num_(posinf=0.0)
        if not bool(ok.all()):
            ok |= (aw == ew) | (torch.isnan(aw) & torch.isnan(ew))
    n_bad = ok.numel() - int(ok.sum())
    if n_bad == 0:
        return None
    return report_mismatch(ew, aw, ok, name=name, tol_desc=f"atol={atol:g}, rtol={rtol:g}", n_bad=n_bad)


def report_mismatch(e: torch.Tensor, a: torch.Tensor, ok: torch.Tensor, *, name: str, tol_desc: str,
                    n_bad: int) -> Mismatch:
    """Error statistics over the mismatching elements (one gather, so huge outputs stay cheap)."""
    bad = ~ok
    e_bad, a_bad = e[bad].double(), a[bad].double()
    diff = (a_bad - e_bad).abs()
    finite = torch.isfinite(diff)
    n_nonfinite = int((~finite).sum())
    max_abs = float("inf") if n_nonfinite or not bool(finite.any()) else float(diff[finite].max())
    rel = diff / e_bad.abs().clamp_min(1e-12)
    rel_finite = rel[torch.isfinite(rel)]
    max_rel = float("inf") if n_nonfinite or not rel_finite.numel() else float(rel_finite.max())
    bad_idx = bad.nonzero()[:N_FIRST].tolist() if ok.dim() else [[]] * min(1, n_bad)
    first = [MismatchEntry(index=idx, expected=float(e[tuple(idx)]), actual=float(a[tuple(idx)]))
             for idx in bad_idx]
    new_nan = bool((torch.isnan(a_bad) & ~torch.isnan(e_bad)).any())
    total = e.numel()
    mm = Mismatch(output=name, reason="nan" if new_nan else "values", expected_desc=str(tuple(e.shape)),
                  actual_desc=str(tuple(a.shape)), max_abs_err=max_abs, max_rel_err=max_rel,
                  n_mismatch=n_bad, n_total=total, mismatch_frac=n_bad / max(total, 1), first=first)
    mm.message = _message(mm, tol_desc) + _hint(e_bad, a_bad, ok, new_nan)
    return mm


def _message(mm: Mismatch, tol_desc: str) -> str:
    shown = "; ".join(f"{m.index}: expected {m.expected:.6g}, got {m.actual:.6g}" for m in mm.first)
    return (f"{mm.output}: {mm.n_mismatch} of {mm.n_total} elements ({100 * mm.mismatch_frac:.3g}%) are "
            f"outside {tol_desc}; max abs err {mm.max_abs_err:.4g}, max rel err "
            f"{mm.max_rel_err:.4g}. First mismatches: {shown}.")


def _hint(e_bad: torch.Tensor, a_bad: torch.Tensor, ok: torch.Tensor, new_nan: bool) -> str:
    """One plain guess at the bug's shape, when the pattern is clear (inputs: the mismatching values)."""
    if new_nan:
        return (" NaN appears where the reference has none: output elements left unwritten (kiln fills "
                "fresh memory with NaN) or a division by zero / log of a negative.")
    if ok.dim() >= 1 and ok.shape[-1] > 1:
        bad_cols = (~ok).reshape(-1, ok.shape[-1]).any(0).nonzero().flatten()
        if bad_cols.numel() and int(bad_cols.min()) >= ok.shape[-1] - 2:
            return " Only the last column(s) differ: check the boundary mask / off-by-one at the tail."
    shape = _scale_or_offset(e_bad, a_bad)
    if shape:
        return shape
    if e_bad.numel() > 0.5 * ok.numel():
        return " Most elements differ: check the reduction axis, the indexing or the formula."
    return ""


def _scale_or_offset(e: torch.Tensor, a: torch.Tensor) -> str:
    """A constant ratio is claimed only where the expected values vary enough to show one: an added
    term c makes actual/expected = 1 + c/expected, which is also near-constant when the expected
    values are (the transcripts' logsumexp: +0.68 everywhere read as "a constant 1.164")."""
    keep = e.abs() > 1e-6
    if int(keep.sum()) <= 3:
        return ""
    e, a = e[keep], a[keep]
    ratio, offset = a / e, a - e
    varies = float(e.std()) > 1e-2 * float(e.abs().mean())
    if varies and float(ratio.std()) < 1e-3 * abs(float(ratio.mean())) + 1e-9:
        return f" actual/expected is a constant {float(ratio.mean()):.4g}: a missing or extra scale factor."
    if float(offset.std()) < 1e-2 * abs(float(offset.mean())) + 1e-9:
        return (f" actual - expected is a near-constant {float(offset.mean()):+.4g}"
                + (": an extra or missing added term (a bias, padded lanes counted in a sum or max, an offset)."
                   if varies else "; the expected values barely vary here, so an added term and a scale "
                   "factor look alike: check both."))
    return ""
