"""The numerics tolerance: judge a candidate's output against a high-precision reference, allowing
the error that rounding makes with this data (the rule, its bound and its constants: docs/tolerance.md).

For every compared element i of a floating output, with h the high-precision reference, d the
native-dtype reference's own error (native - h) and A the magnitude of the data contributing to
it (both from `kiln.tools.numerics`, computed by the reference worker):

    |actual_i - h_i| <= rtol |h_i| + u (C A_i + G mean(A)) + K (|d_i| + r A_i) + S s_i,    r = ||d|| / ||A||

- rtol |h_i|: the dtype's relative tolerance (fp32 1e-4, bf16/fp16 1e-2, KernelBench's), as before;
- u C A_i: the rounding-error bound of a sum or dot product, gamma_n sum|x_i| with gamma_n ~ n u,
  at u = 2^-24 (kernels for every dtype accumulate in fp32) and C = 128 standing for n u's
  probabilistic size at the chain lengths honest kernels use (sequential chains of ~10^4);
- u G mean(A): the same at the output's typical magnitude, where an element's own A cancels; mean(A)
  is never taken below its value on the case's unscaled (x1) inputs, because constants in a formula
  fix a scale the data does not (2 sigmoid(2x) - 1 errs by ulps of 1.0 on x0.001 inputs too);
- K (|d_i| + r A_i): K times what the reference computed in the problem's own dtype gets wrong,
  here and on average per unit of magnitude over the output;
- S s_i: S times how far the high-precision output moves when every input moves by one unit
  roundoff of the problem's dtype (random signs): the output's conditioning at this data, which A
  misses where the result cancels against the data's size (LayerNorm of inputs far from zero).

Elements where the reference or its numerics are not finite are judged as before (equal to the
native reference, NaN facing NaN, or within atol + rtol |native|). The fixed rule
|a - native| <= atol + rtol |native| judges every output when --atol/--rtol are given, outputs
without numerics, and outputs whose native and high-precision references differ by more than
rounding explains (r > R_MAX: random ops, dtype-dependent code); the verdict says which rule decided.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from kiln.tools import chunked, sketch
from kiln.tools.correctness import compare_output, on_full_tensor, report_mismatch, stats_report, structure
from kiln.tools.records import Mismatch, OutputVerdict

U_ACC = 2.0**-24
C_MAG = 128.0
G_OUT = 16.0
K_NATIVE = 8.0
S_SENS = 8.0
UNIT_ROUNDOFF = {"fp32": 2.0**-24, "bf16": 2.0**-8, "fp16": 2.0**-11}
REFINE_BELOW = 16.0  # a numerics rejection within this factor of its allowance is judged again on more draws


def r_max(dtype: str) -> float:
    """Above this native error per unit of magnitude, the two references compute different things."""
    return max(2.0**-10, 4 * UNIT_ROUNDOFF[dtype])


@dataclass
class Judgement:
    """One trial's verdict: the first failing output's mismatch (None: passed), every output's
    verdict, and what the fixed atol/rtol rule against the native reference says."""

    mismatch: Mismatch | None
    outputs: list[OutputVerdict] = field(default_factory=list)
    legacy_passed: bool = False
    mean_mag: dict[str, float] = field(default_factory=dict)  # mean A of each output the numerics rule judged

    @property
    def close_call(self) -> bool:
        """Rejected by the numerics rule, and no output further than `REFINE_BELOW` times its
        allowance: the sensitivity's one draw may be what decided (`numerics.refine_sensitivity`)."""
        failed = [v for v in self.outputs if not v.passed]
        return bool(failed) and all(v.rule == "numerics" and v.max_err_over_tol is not None
                                    and v.max_err_over_tol <= REFINE_BELOW for v in failed)

    @property
    def rule(self) -> str:
        """numerics when the numerics rule judged every floating output, else the first other rule."""
        rules = [v.rule for v in self.outputs if v.rule != "exact"]
        return next((r for r in rules if r != "numerics"), "numerics" if rules else "exact")


def judge(exp: dict, act: dict, *, dtype: str, atol: float, rtol: float, numerics: bool = True,
          unit_mag: dict[str, float] | None = None) -> Judgement:
    """Compare a candidate's packed output `act` with the reference's `exp` (its 'numerics' entry
    from `kiln.tools.numerics.numerics_pack`). `numerics=False`: --atol/--rtol were given.
    `unit_mag`: each output's mean A on the case's unscaled (x1) inputs, the floor of the G term."""
    bad = structure(exp, act)
    if bad is not None:
        return Judgement(bad, [OutputVerdict(output=bad.output, rule="structure", passed=False,
                                             legacy_atol_rtol_passed=False)])
    num = exp.get("numerics") if numerics else None
    first, verdicts, mags = None, [], {}
    for e, a in zip(exp["meta"], act["meta"], strict=True):
        mm, verdict, mag = _judge_output(e, a, exp, act, num, dtype=dtype, atol=atol, rtol=rtol, numerics=numerics,
                                         floor=(unit_mag or {}).get(e["name"], 0.0))
        verdicts.append(verdict)
        first = first or mm
        if mag is not None:
            mags[e["name"]] = mag
    return Judgement(first, verdicts, all(v.legacy_atol_rtol_passed for v in verdicts), mags)


def _floating(t: Any) -> bool:
    t = t["values"] if sketch.is_sketch(t) else t
    return isinstance(t, torch.Tensor) and t.is_floating_point()


def _judge_output(e: dict, a: dict, exp: dict, act: dict, num: dict | None, *, dtype: str, atol: float,
                  rtol: float, numerics: bool, floor: float) -> tuple[Mismatch | None, OutputVerdict, float | None]:
    name = e["name"]
    legacy = compare_output(e, a, exp, act, atol=atol, rtol=rtol)
    verdict = OutputVerdict(output=name, rule="atol_rtol", passed=legacy is None,
                            legacy_atol_rtol_passed=legacy is None)
    if e["kind"] == "tensor" and not _floating(exp["tensors"][name]):
        verdict.rule = "exact"
        return _ruled(legacy, "exact"), verdict, None
    why = _why_not(num, name, numerics) if e["kind"] == "tensor" else "a number"
    if why is None:
        out = _numerics_output(exp["tensors"][name], act["tensors"][name], num["outputs"][name],  # type: ignore[index]
                               dtype=dtype, atol=atol, rtol=rtol, name=name, floor=floor)
        if isinstance(out, str):
            why = out
        else:
            mm, ratio, mag = out
            verdict.rule, verdict.passed, verdict.max_err_over_tol = "numerics", mm is None, ratio
            verdict.sens_draws = int(num.get("sens_draws", 1)) if "sens" in num["outputs"][name] else 0  # type: ignore[union-attr]
            return mm, verdict, mag
    verdict.why = why
    return _ruled(legacy, "atol_rtol"), verdict, None


def _ruled(mm: Mismatch | None, rule: str) -> Mismatch | None:
    if mm is not None and mm.rule != "structure":
        mm.rule = rule
    return mm


def _why_not(num: dict | None, name: str, numerics: bool) -> str | None:
    """Why this output is not judged by the numerics rule; None when it is."""
    if not numerics:
        return "--atol/--rtol given"
    if num is None:
        return "the reference computed no numerics for this trial"
    if num.get("status") != "ok":
        return f"numerics {num.get('status')}"
    if name not in num.get("outputs", {}):
        return "the high-precision reference gave no matching output"
    return None


def _numerics_output(et: Any, at: Any, num: dict, *, dtype: str, atol: float, rtol: float, name: str, floor: float
                     ) -> tuple[Mismatch | None, float, float | None] | str:
    """(mismatch or None, worst error / allowance, mean A) of one output, or why the rule can't judge it."""
    if not (sketch.is_sketch(et) or sketch.is_sketch(at)):
        out = numerics_values(et, at, num["err"], num["mag"], dtype=dtype, atol=atol, rtol=rtol, name=name,
                              sens=num.get("sens"), unit_mean_a=floor)
        return out if isinstance(out, str) else (out.mismatch, out.ratio, out.mean_a)
    if not (sketch.is_sketch(et) and sketch.is_sketch(at)) or not sketch.same_sampling(et, at):
        return Mismatch(output=name, reason="type", rule="structure",
                        message=f"{name}: the two sides sampled different positions."), math.inf, None
    out = numerics_values(et["values"], at["values"], num["err"], num["mag"], dtype=dtype, atol=atol, rtol=rtol,
                          name=name, sens=num.get("sens"), unit_mean_a=floor)
    if isinstance(out, str):
        return out
    if out.mismatch is not None:
        return on_full_tensor(out.mismatch, et), out.ratio, out.mean_a
    return (_ruled(stats_report(_stats_mismatch(et, at, rtol, out.mean_tol), et, name), "numerics"), out.ratio,
            out.mean_a)


def _stats_mismatch(e: dict, a: dict, rtol: float, mean_tol: float) -> str | None:
    """The sketch's whole-tensor checks: the same NaN/inf counts, and sums of |x| that differ by no
    more than the gross-error margin plus the elements' allowances (cancelling outputs can differ
    by more than 1e-3 of their own small sum and still be right)."""
    why = sketch.stats_mismatch(e, a, math.inf)  # rtol inf: the NaN/inf counts only
    if why is not None:
        return why
    numel = math.prod(e["shape"])
    allowed = max(10 * rtol, 1e-3) * abs(e["sum_abs"]) + numel * mean_tol
    if abs(a["sum_abs"] - e["sum_abs"]) > allowed:
        return (f"the sum of |output| over the whole tensor is {a['sum_abs']:.6g}, the reference's is "
                f"{e['sum_abs']:.6g}: elements outside the compared sample differ")
    return None


@dataclass
class Values:
    mismatch: Mismatch | None
    ratio: float  # worst |a - h| / allowance over the elements the rule judged
    mean_tol: float  # mean allowance (a sketch's whole-tensor check scales with it)
    mean_a: float = 0.0  # mean A over the compared finite elements


def _stats(d: torch.Tensor, mag: torch.Tensor, lo: torch.Tensor) -> tuple[float, float]:
    """(mean A, r = ||d|| / ||A||) over the elements whose reference and numerics are finite."""
    n = sum_a = sum_a2 = sum_d2 = 0.0
    for dd, aa, ll in zip(*(chunked.slices(t) for t in (d, mag, lo)), strict=True):
        dv, av, lv = dd[1].double(), aa[1].double(), ll[1]
        ok = torch.isfinite(dv) & torch.isfinite(av) & torch.isfinite(lv)
        dv, av = dv[ok], av[ok]
        n += dv.numel()
        sum_a, sum_a2, sum_d2 = sum_a + float(av.sum()), sum_a2 + float((av * av).sum()), sum_d2 + float((dv * dv).sum())
    if sum_a2 == 0.0:
        return 0.0, 0.0 if sum_d2 == 0.0 else math.inf
    return sum_a / max(n, 1.0), math.sqrt(sum_d2 / sum_a2)


def numerics_values(e: torch.Tensor, a: torch.Tensor, err: torch.Tensor, mag: torch.Tensor, *, dtype: str,
                    atol: float, rtol: float, name: str = "out", sens: torch.Tensor | None = None,
                    unit_mean_a: float = 0.0) -> Values | str:
    """The rule on aligned values: the native reference `e`, the candidate's `a`, the native
    reference's error `err`, the magnitude `mag` and the sensitivity `sens` (all the same shape;
    `sens` None: none computed, no allowance from it), or why it can't judge. `unit_mean_a`: mean A
    of this output on unscaled inputs; the G term uses the larger of it and this trial's mean A."""
    sens = torch.zeros((), dtype=mag.dtype, device=mag.device).expand(mag.shape) if sens is None else sens
    if not (e.shape == a.shape == err.shape == mag.shape == sens.shape):
        return "the numerics do not line up with the output"
    own_mean_a, r = _stats(err, mag, e)
    mean_a = max(own_mean_a, unit_mean_a)  # both over finite elements only (`_stats`)
    if r > r_max(dtype):
        return (f"the native reference differs from the high-precision one by {r:.3g} of the data's magnitude, "
                "more than rounding explains (random ops or dtype-dependent code?)")
    ok = torch.empty(e.shape, dtype=torch.bool, device=e.device).reshape(-1)
    ratio, tol_sum = 0.0, 0.0
    for off, (lo, av, d, m, sv) in _aligned(e, a, err, mag, sens):
        chunk_ok, chunk_ratio, chunk_tol = _chunk(lo, av, d, m, sv, mean_a=mean_a, r=r, atol=atol, rtol=rtol)
        ok[off:off + lo.numel()] = chunk_ok
        ratio, tol_sum = max(ratio, chunk_ratio), tol_sum + chunk_tol
    mean_tol = tol_sum / max(e.numel(), 1)
    n_bad = ok.numel() - int(ok.sum())
    if n_bad == 0:
        return Values(None, ratio, mean_tol, own_mean_a)
    work = torch.float64 if e.dtype == torch.float64 else torch.float32
    expected = torch.where(torch.isfinite(err), e.to(work) - err.to(work), e.to(work))  # the high-precision values
    desc = (f"the allowed rounding error (rtol {rtol:g} of the value + {C_MAG + G_OUT:g} x 2^-24 of the magnitude "
            f"of the data summed into it + {K_NATIVE:g}x the {dtype} reference's own error + {S_SENS:g}x the "
            f"output's move under a one-ulp move of its inputs and intermediate values; worst error "
            f"{ratio:.3g}x the allowance)")
    mm = report_mismatch(expected, a.to(work), ok.reshape(e.shape), name=name, tol_desc=desc, n_bad=n_bad)
    mm.rule, mm.max_err_over_tol = "numerics", ratio
    return Values(mm, ratio, mean_tol, own_mean_a)


def _aligned(*ts: torch.Tensor) -> Any:
    """(offset, (slices...)) over tensors of one shape, `chunked.CHUNK` elements at a time."""
    flats = [t.reshape(-1) for t in ts]
    for off in range(0, flats[0].numel(), chunked.CHUNK):
        yield off, [f[off:off + chunked.CHUNK] for f in flats]


def _chunk(lo: torch.Tensor, av: torch.Tensor, d: torch.Tensor, m: torch.Tensor, sv: torch.Tensor, *, mean_a: float,
           r: float, atol: float, rtol: float) -> tuple[torch.Tensor, float, float]:
    """(ok mask, worst error / allowance, sum of allowances) of one slice, in float32 (float64 for
    float64 outputs): |(a - lo) + d| is |a - h| without forming h."""
    work = torch.float64 if lo.dtype == torch.float64 else torch.float32
    lo, av, d, m = lo.to(work), av.to(work), d.to(work), m.to(work)
    valid = torch.isfinite(lo) & torch.isfinite(d) & torch.isfinite(m)
    err = (av - lo).add_(d).abs_()
    tol = (lo - d).abs_().mul_(rtol).add_(m * (U_ACC * C_MAG + K_NATIVE * r)).add_(d.abs().mul_(K_NATIVE))
    tol.add_(U_ACC * G_OUT * mean_a).add_(torch.nan_to_num(sv.to(work), nan=0.0, posinf=0.0).abs_().mul_(S_SENS))
    ok = valid & (err <= tol)
    outside = ~valid  # the reference or its numerics are not finite here: judged as before
    ok |= outside & torch.isfinite(lo) & ((av - lo).abs() <= atol + rtol * lo.abs())
    ok |= (av == lo) | (torch.isnan(av) & torch.isnan(lo))
    ratios = torch.where(valid, err / tol, torch.zeros_like(err)).nan_to_num_(nan=0.0, posinf=math.inf)
    worst = float(ratios.max()) if ratios.numel() else 0.0
    return ok, worst, float(torch.where(valid, tol, 0.0).sum(dtype=torch.float64))
