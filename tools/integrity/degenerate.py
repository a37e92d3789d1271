"""Degenerate problems: references whose output a trivial candidate can reproduce.

Degenerate means *independent of the input*, never "constant within one output" (a loss returns
one scalar, which trivially equals itself). Judged in the parent from the reference's packed
outputs for the input draws the check already makes (`assess_packs`, on `digest`s of them):
- `degenerate.input-independent`: every draw's outputs would pass as a candidate's outputs for
  every other draw (by the same rule the check applies: `kiln.tools.tolerance`, or atol/rtol);
- `degenerate.constant`: the same, and every element is one value (`torch.full(...)` passes);
- `degenerate.near-zero`: on the problem's own inputs (distribution x1) every output element lies
  within the absolute tolerance of zero, so `torch.zeros(...)` passes a fixed-tolerance check
  such as KernelBench's (KernelBench's 23_Softmax: 393216 outputs per row, each ~2.5e-6).
And, in the reference worker, where the model is at hand (`assess`):
- `degenerate.weight-independent`: two different weight draws (seeds) give the same output.

A degenerate problem is reported, not failed: speedups on it mean nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_flatten

from kiln.tools import chunked, sketch
from kiln.tools.records import DegenerateRecord

ATOL = 1e-4
RTOL = 1e-4
DIGEST_N = 1 << 16  # elements kept per output


# ----------------------------------------------------------------------------- parent side


def draws(distributions: list[str], fingerprints: dict[tuple[str, int], Any]) -> list[tuple[str, int]]:
    """The (distribution, trial) draws to compare: the first trial of every distribution the
    reference ran and a second one of x1, those whose inputs differ from the first draw's
    (`fingerprints`: each draw's input fingerprint, only for draws the reference made)."""
    keys = [k for k in dict.fromkeys([(d, 0) for d in distributions] + [("x1", 1)]) if k in fingerprints]
    return [k for i, k in enumerate(keys) if i == 0 or fingerprints[k] != fingerprints[keys[0]]]


def digest(packed: dict[str, Any], n: int = DIGEST_N) -> dict[str, Any]:
    """A small stand-in for one packed reference output (`correctness.pack`, with numerics): per
    output, the same `n` (or fewer) positions of its values and numerics, and the max |value|."""
    num = (packed.get("numerics") or {}).get("outputs", {}) if (packed.get("numerics") or {}).get("status") == "ok" \
        else {}
    out: dict[str, Any] = {}
    for m in packed["meta"]:
        name = m["name"]
        if m["kind"] == "number":
            out[name] = {"number": m["value"]}
        elif m["kind"] == "tensor":
            t = packed["tensors"][name]
            values = (t["values"] if sketch.is_sketch(t) else t).reshape(-1)
            idx = spread(values.numel(), n) if values.numel() else None
            out[name] = {"values": values[idx] if idx is not None else values, "max_abs": _max_abs(values),
                         **({k: v.reshape(-1)[idx] for k, v in num[name].items()} if name in num and idx is not None
                            else {})}
    return out


def spread(numel: int, n: int) -> torch.Tensor:
    """`min(n, numel)` flat positions evenly spread over `range(numel)`, first and last included, in
    exact int64 arithmetic at any size. (`torch.linspace` is float32 by default, and float32 cannot
    hold every integer above 2^24: its last position rounded up to `numel` at 8192x4000.)
    Position i is floor(i * (numel - 1) / (k - 1)), computed as i*q + (i*r) // (k - 1) with
    q, r = divmod(numel - 1, k - 1), so no product exceeds k^2."""
    k = min(n, numel)
    if k <= 1:
        return torch.zeros(k, dtype=torch.long)
    q, r = divmod(numel - 1, k - 1)
    i = torch.arange(k, dtype=torch.long)
    return i * q + (i * r) // (k - 1)


def _max_abs(values: torch.Tensor) -> float | None:
    """The largest finite |value| (None: no finite value)."""
    f = values[torch.isfinite(values)] if values.is_floating_point() else values
    return float(f.abs().max()) if f.numel() else None


def assess_packs(digests: list[tuple[str, dict[str, Any]]], *, dtype: str, atol: float, rtol: float,
                 numerics: bool = True) -> DegenerateRecord:
    """`digests`: (distribution, `digest`) of the reference's outputs for distinct input draws of
    one case, the problem's own (x1) first. `numerics`: compare as the numerics rule does."""
    reasons: list[str] = []
    own = [d for dist, d in digests if dist == "x1"] or [d for _, d in digests]
    if not any(_finite(d) for _, d in digests):
        return DegenerateRecord(degenerate=True, reasons=["degenerate.constant: no output element is finite"])
    peak = max((v["max_abs"] for d in own for v in d.values() if v.get("max_abs") is not None), default=None)
    if peak is not None and peak <= atol and not _any_number(own):
        reasons.append(f"degenerate.near-zero: max |output| = {peak:.3g} <= atol {atol:g} on the problem's own "
                       "inputs; zeros pass a fixed-tolerance check")
    first, others = digests[0][1], [d for _, d in digests[1:]]
    if others and all(_same(first, d, dtype=dtype, atol=atol, rtol=rtol, numerics=numerics) for d in others):
        value = _constant(first, atol, rtol)
        reasons.append(f"degenerate.constant: every output element equals {value:.6g} for every input draw"
                       if value is not None else
                       f"degenerate.input-independent: {len(digests)} different input draws give the same output")
    return DegenerateRecord(degenerate=bool(reasons), reasons=reasons)


def _finite(d: dict[str, Any]) -> bool:
    return any(v.get("max_abs") is not None or isinstance(v.get("number"), (int, float)) for v in d.values())


def _any_number(ds: list[dict[str, Any]]) -> bool:
    return any("number" in v for d in ds for v in d.values())


def _same(a: dict[str, Any], b: dict[str, Any], *, dtype: str, atol: float, rtol: float, numerics: bool) -> bool:
    """Would b's outputs pass for a's inputs?"""
    from kiln.tools.tolerance import numerics_values

    for name, va in a.items():
        vb = b.get(name)
        if vb is None or ("number" in va) != ("number" in vb):
            return False
        if "number" in va:
            if va["number"] != vb["number"]:
                return False
            continue
        ea, eb = va["values"], vb["values"]
        if ea.shape != eb.shape:
            return False
        if numerics and "err" in va and ea.is_floating_point():
            got = numerics_values(ea, eb, va["err"], va["mag"], dtype=dtype, atol=atol, rtol=rtol, sens=va.get("sens"))
            if not isinstance(got, str):
                if got.mismatch is not None:
                    return False
                continue
        if not chunked.allclose(ea, eb, atol=atol, rtol=rtol):
            return False
    return True


def _constant(d: dict[str, Any], atol: float, rtol: float) -> float | None:
    """The one value every (finite) tensor element of `d` takes, within atol/rtol; None if none."""
    values = [v["values"].double() for v in d.values() if "values" in v]
    flat = torch.cat([v.reshape(-1) for v in values]) if values else torch.zeros(0)
    flat = flat[torch.isfinite(flat)]
    if not flat.numel():
        return None
    first = flat[0]
    return float(first) if bool(((flat - first).abs() <= atol + rtol * first.abs()).all()) else None


# ----------------------------------------------------------------------------- reference side


def assess(build_model: Callable[[int], nn.Module], make_inputs: Callable[[int], tuple], *,
           atol: float = ATOL, rtol: float = RTOL) -> DegenerateRecord:
    """Weight independence: `build_model(seed)` builds the reference after seeding, `make_inputs(seed)`
    draws inputs. (Input independence and near-zero outputs: `assess_packs`, in the parent.)"""
    model_a, x0 = build_model(0), make_inputs(0)
    y00 = _run(model_a, x0)
    model_b = build_model(1)
    reasons = []
    if _differs(_params(model_a), _params(model_b)) and _same_tensors(y00, _run(model_b, x0), atol, rtol):
        reasons.append("degenerate.weight-independent: two different weight draws give the same output")
    return DegenerateRecord(degenerate=bool(reasons), reasons=reasons)


def _run(model: nn.Module, inputs: tuple) -> list[torch.Tensor]:
    """Copies of every tensor output (tuples and lists included), kept on the model's device."""
    with torch.no_grad():
        out = model(*[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs])
    return [t.detach().clone() for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]


def _same_tensors(a: list[torch.Tensor], b: list[torch.Tensor], atol: float, rtol: float) -> bool:
    return len(a) == len(b) and all(chunked.allclose(x, y, atol=atol, rtol=rtol) for x, y in zip(a, b, strict=True))


def _params(model: nn.Module) -> list[torch.Tensor]:
    return [p.detach() for p in model.parameters()]


def _differs(a: object, b: object) -> bool:
    ta = [t for t in tree_flatten(a)[0] if isinstance(t, torch.Tensor)]
    tb = [t for t in tree_flatten(b)[0] if isinstance(t, torch.Tensor)]
    if not ta or len(ta) != len(tb):
        return bool(ta or tb) and len(ta) != len(tb)
    return any(x.shape != y.shape or not torch.equal(x, y) for x, y in zip(ta, tb, strict=True))
