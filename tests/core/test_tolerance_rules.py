"""The numerics tolerance stays strict (reduced-precision operands, wrong normalisations, dropped
terms fail), works on sketched outputs, and hands over to atol/rtol when asked or when its
numerics can't be trusted, saying which rule decided."""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest
import torch
from torch import nn

from kiln.tools import numerics, sketch
from kiln.tools.correctness import pack
from kiln.tools.inputs import heavy_tailed
from kiln.tools.records import TrialRecord
from kiln.tools.tolerance import judge

from .numerics_helpers import SEED, LayerNorm, Linear, Reduce, judged, reference_pack

G = torch.Generator().manual_seed(7)


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=G)


def tf32(x: torch.Tensor) -> torch.Tensor:
    """x rounded to TF32 (10 explicit mantissa bits), as a tensor core reads fp32 operands."""
    bits = x.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


def softmax_plus_one(x: torch.Tensor) -> torch.Tensor:
    e = torch.exp(x - x.max(-1, keepdim=True).values)
    return e / (e.sum(-1, keepdim=True) + 1)


def unbiased_layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(x.var(-1, keepdim=True, unbiased=True) + 1e-5) * w + b


@pytest.mark.parametrize("scale", [1.0, 1000.0])
def test_reduced_precision_operands_fail_in_an_fp32_problem(scale: float) -> None:
    """fp16, bf16 and TF32 operands of a dot product (K=129, the corpus's downcast_fp16 case, and
    K=1024) round each term by 2^-11..2^-8: far above fp32 accumulation error, so they fail."""
    for k in (129, 1024):
        x, w = randn(67, k) * scale, randn(95, k) / math.sqrt(k)
        model = Linear(w)
        for name, low in (("fp16", lambda t: t.half().float()), ("bf16", lambda t: t.bfloat16().float()),
                          ("tf32", tf32)):
            got = (low(x).double() @ low(w).double().t()).float()
            j = judged(model, (x,), got)
            assert j.mismatch is not None and j.mismatch.rule == "numerics", (name, k, j.outputs)
        sequential = torch.from_numpy(np.cumsum((x[:, None, :] * w[None]).numpy(), axis=2, dtype=np.float32)[..., -1])
        assert judged(model, (x,), sequential).mismatch is None  # fp32, one term at a time: honest


def test_wrong_kernels_fail() -> None:
    x, w, b = randn(29, 1027) * 2 + 0.5, randn(1027), randn(1027)
    ln = LayerNorm(w, b)
    assert judged(ln, (x,), unbiased_layer_norm(x, w, b)).mismatch is not None  # ~5e-4 relative
    assert judged(ln, (x,), nn.functional.layer_norm(x, (1027,), None, b)).mismatch is not None  # no weight
    s = randn(37, 1000)
    softmax = Reduce("softmax")
    assert judged(softmax, (s,), softmax_plus_one(s)).mismatch is not None
    assert judged(softmax, (s,), torch.exp(s - s.max(-1, keepdim=True).values)).mismatch is not None  # unnormalised
    assert judged(softmax, (s,), torch.softmax(s.bfloat16(), -1).float()).mismatch is not None  # bf16 compute
    r = randn(16, 300) * 1000
    total = Reduce("sum")
    assert judged(total, (r,), r[:, :-1].sum(-1)).mismatch is not None  # off by one: last term dropped
    tail = torch.softmax(s, -1)
    tail[:, -1] = float("nan")  # last column unwritten
    mm = judged(softmax, (s,), tail).mismatch
    assert mm is not None and mm.reason == "nan" and mm.first[0].index == [0, 999]


def test_zeros_for_outputs_below_atol_fail_elementwise() -> None:
    """KernelBench's 23_Softmax: every output ~2.5e-6, below atol 1e-4, so zeros pass a fixed-atol
    test; here the allowance scales with the data."""
    x = torch.rand(2, 393216, generator=G)
    j = judged(Reduce("softmax"), (x,), torch.zeros(2, 393216))
    assert j.mismatch is not None and j.legacy_passed


def test_the_issue_row_sum_passes_and_the_fixed_rule_does_not() -> None:
    """16x300x40 summed over dim 1, inputs x1000, cancelling: one term at a time in fp32."""
    failed_before = 0
    for _ in range(5):
        x = randn(16, 300, 40) * 1000
        seq = torch.from_numpy(np.cumsum(x.numpy(), axis=1, dtype=np.float32)[:, -1, :])
        j = judged(Reduce("sum", dim=1), (x,), seq)
        assert j.mismatch is None and j.rule == "numerics"
        failed_before += not j.legacy_passed
    assert failed_before >= 1


def test_sketched_outputs_carry_numerics_at_the_sampled_positions(monkeypatch) -> None:
    monkeypatch.setattr(sketch, "SKETCH_MIN_NUMEL", 1000)
    monkeypatch.setattr(sketch, "N_UNIFORM", 512)
    monkeypatch.setattr(sketch, "N_EDGE", 64)
    x = randn(64, 300, 40) * 1000
    model = Reduce("sum", dim=1)
    ref = reference_pack(model, (x,))
    assert sketch.is_sketch(ref["tensors"]["out"])
    err = ref["numerics"]["outputs"]["out"]["err"]
    assert err.shape == ref["tensors"]["out"]["values"].shape
    high = x.double().sum(1).reshape(-1)[sketch.sketch_positions(ref["tensors"]["out"])]
    assert torch.allclose(ref["tensors"]["out"]["values"].double() - err.double(), high, rtol=0, atol=1e-2)
    seq = torch.from_numpy(np.cumsum(x.numpy(), axis=1, dtype=np.float32)[:, -1, :])
    ok = judge(ref, pack(seq, SEED), dtype="fp32", atol=1e-4, rtol=1e-4)
    assert ok.mismatch is None and ok.rule == "numerics"
    seq[63, 39] += 5000.0  # an edge element: always in the sample
    bad = judge(ref, pack(seq, SEED), dtype="fp32", atol=1e-4, rtol=1e-4)
    assert bad.mismatch is not None and bad.mismatch.first[0].index == [63, 39]


def test_atol_rtol_given_decide_and_the_record_says_so() -> None:
    x = randn(16, 300, 40) * 1000
    seq = torch.from_numpy(np.cumsum(x.numpy(), axis=1, dtype=np.float32)[:, -1, :])
    j = judged(Reduce("sum", dim=1), (x,), seq, numerics_rule=False)
    assert j.rule == "atol_rtol" and j.outputs[0].why == "--atol/--rtol given"
    assert (j.mismatch is None) == j.legacy_passed


class Dropout(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.dropout(x, 0.5, training=True)


class Fp32Only(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32:
            raise TypeError("this model only runs in fp32")
        return x * 2


def test_without_trustworthy_numerics_the_fixed_rule_decides() -> None:
    x = randn(64, 64)
    j = judged(Dropout(), (x,), x)  # a random reference: the two references disagree wholesale
    assert j.rule == "atol_rtol" and "more than rounding explains" in j.outputs[0].why
    j = judged(Fp32Only(), (x,), x * 2)
    assert j.mismatch is None and j.rule == "atol_rtol" and "unavailable: TypeError" in j.outputs[0].why


class Exp(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.exp(x)


def test_non_finite_reference_elements_are_judged_as_before() -> None:
    x = torch.tensor([[1.0, 100.0, -3.0, float("nan")]])
    ref = reference_pack(Exp(), (x,))
    assert judge(ref, pack(torch.exp(x), SEED), dtype="fp32", atol=1e-4, rtol=1e-4).mismatch is None
    wrong = torch.exp(x)
    wrong[0, 1] = 3.0e38  # finite where the reference overflowed
    assert judge(ref, pack(wrong, SEED), dtype="fp32", atol=1e-4, rtol=1e-4).mismatch is not None
    assert not judge(ref, pack(wrong, SEED), dtype="fp32", atol=1e-4, rtol=1e-4).legacy_passed  # inf <= inf: fixed too
    assert "NaN/inf" in (numerics.nonfinite(ref) or "")


def test_bf16_problem_accumulating_in_fp32_passes_in_bf16_fails() -> None:
    x = (randn(8, 4096) * 1000).bfloat16()
    model = Reduce("sum").to(torch.bfloat16)
    honest = x.float().sum(-1).bfloat16()  # fp32 accumulation, one rounding at the end
    assert judged(model, (x,), honest, dtype="bf16").mismatch is None
    acc = torch.zeros(8, dtype=torch.bfloat16)
    for i in range(4096):  # a bf16 accumulator: 4096 roundings to 8 bits
        acc = acc + x[:, i]
    assert judged(model, (x,), acc, dtype="bf16").mismatch is not None


def test_trial_record_with_output_verdicts_round_trips_json() -> None:
    x = randn(16, 300, 40) * 1000
    j = judged(Reduce("sum", dim=1), (x,), x.sum(1) + 1.0)
    rec = TrialRecord(case="problem", distribution="x1000", trial=0, passed=j.mismatch is None, mismatch=j.mismatch,
                      rule=j.rule, legacy_atol_rtol_passed=j.legacy_passed, outputs=j.outputs)
    assert TrialRecord.model_validate_json(rec.model_dump_json()) == rec


def chan_layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, chunk: int = 4096) -> torch.Tensor:
    """The real model's 40_LayerNorm kernel in torch (fp32): per-chunk mean and M2, merged by
    Chan's formula. An honest, stable algorithm, in another order than PyTorch's."""
    rows, n = x.shape
    parts = [x[:, c:c + chunk] for c in range(0, n, chunk)]
    cnt = torch.tensor([float(p.shape[1]) for p in parts])
    means = torch.stack([p.sum(1) / p.shape[1] for p in parts], 1)
    m2 = torch.stack([((p - means[:, i:i + 1]) ** 2).sum(1) for i, p in enumerate(parts)], 1)
    mean = (cnt * means).sum(1, keepdim=True) / n
    var = (m2 + cnt * (means - mean) ** 2).sum(1, keepdim=True) / n
    return (x - mean) / torch.sqrt(var + 1e-5) * w + b


@pytest.mark.parametrize("scale", [1.0, 1000.0, -1.0])
def test_layer_norm_of_inputs_far_from_zero_is_not_rejected(scale: float) -> None:
    """The false rejection found replaying transcript 40: its Proposer's `rand + 10` case (mean/std
    ~ 35) put the Chan-merge kernel's honest error (the mean's rounding, ~u |x| rstd |w| per
    element) at up to 1.9x the allowance in some draws. The sensitivity term sees that
    conditioning; without it (`sens` dropped) the same draw fails."""
    n = 17 * 64 * 65  # the case's (2, 17, 64, 65), nn.LayerNorm's initial weight and bias
    w, b = torch.ones(n), torch.zeros(n)
    model = LayerNorm(w, b)
    worst_without = 0.0
    for draw in range(4):
        x = (torch.rand(2, n, generator=torch.Generator().manual_seed(draw)) + 10.0) * scale
        ref = reference_pack(model, (x,))
        got = pack(chan_layer_norm(x, w, b), SEED)
        j = judge(ref, got, dtype="fp32", atol=1e-4, rtol=1e-4)
        assert j.mismatch is None, (scale, draw, j.outputs)
        assert j.outputs[0].max_err_over_tol < 0.5, j.outputs  # with room to spare
        del ref["numerics"]["outputs"]["out"]["sens"]
        worst_without = max(worst_without, judge(ref, got, dtype="fp32", atol=1e-4, rtol=1e-4)
                            .outputs[0].max_err_over_tol)
    assert worst_without > 1.0 if scale == 1000.0 else True, worst_without  # the draw that was rejected


def test_layer_norm_sensitivity_does_not_excuse_lost_precision() -> None:
    """Inputs further from zero (mean/std ~ 3500), the variance as E[x^2] - E[x]^2 in fp32
    (cancellation), or the mean in bf16: both still fail."""
    gen = torch.Generator().manual_seed(2)
    n = 8192
    w, b = 1 + 0.1 * torch.randn(n, generator=gen), 0.1 * torch.randn(n, generator=gen)
    x = torch.rand(4, n, generator=gen) + 1000.0
    model = LayerNorm(w, b)
    mean = x.mean(1, keepdim=True)
    naive_var = (x * x).mean(1, keepdim=True) - mean * mean
    for name, got in (("E[x^2]-E[x]^2", (x - mean) / torch.sqrt(naive_var + 1e-5) * w + b),
                      ("bf16 mean", (x - mean.bfloat16().float()) / torch.sqrt(x.var(1, unbiased=False,
                                                                                      keepdim=True) + 1e-5) * w + b)):
        j = judged(model, (x,), got)
        assert j.mismatch is not None and j.mismatch.rule == "numerics", (name, j.outputs)


class LinearGeluSoftmax(nn.Module):
    def __init__(self, w: torch.Tensor, b: torch.Tensor) -> None:
        super().__init__()
        self.weight, self.bias = nn.Parameter(w.clone()), nn.Parameter(b.clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(nn.functional.gelu(nn.functional.linear(x, self.weight, self.bias)), dim=1)


def sequential_linear_gelu_softmax(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """An honest fp32 kernel: the dot products one term at a time, exact GELU, a max-shifted softmax."""
    z = torch.from_numpy(np.cumsum((x[:, None, :] * w[None]).numpy(), axis=2, dtype=np.float32)[..., -1]) + b
    g = nn.functional.gelu(z)
    e = torch.exp(g - g.max(1, keepdim=True).values)
    return e / e.sum(1, keepdim=True)


def test_softmax_over_large_logits_is_judged_by_the_logits_magnitude(monkeypatch) -> None:
    """Replay 99's case (inputs randn x 50 times the heavy-tailed factor, logits ~1e3): an fp32
    kernel's logits err by ~u 1e3, so its softmax by ~u 1e3 relative, which neither A (softmax stays
    in [0, 1]) nor a move of the inputs alone sees (the logits of a row share their dominant input,
    so their moves cancel in the differences softmax reads). The sensitivity run rounds every
    intermediate value, the logits included: the honest kernel keeps a margin in every draw, and
    without that rounding its worst draw comes closer to the bound."""
    worst = {True: 0.0, False: 0.0}
    for draw in range(24):
        gen = torch.Generator().manual_seed(draw)
        w = (torch.rand(300, 64, generator=gen) * 2 - 1) / 8
        b = (torch.rand(300, generator=gen) * 2 - 1) / 8
        x = heavy_tailed(torch.randn(40, 64, generator=gen) * 50, draw)
        got = pack(sequential_linear_gelu_softmax(x, w, b), SEED)
        for rounding in (True, False):
            with monkeypatch.context() as m:
                if not rounding:
                    m.setattr(numerics, "_Rounding", lambda u, seed: contextlib.nullcontext())
                j = judge(reference_pack(LinearGeluSoftmax(w, b), (x,)), got, dtype="fp32", atol=1e-4, rtol=1e-4)
            assert rounding is False or j.mismatch is None, (draw, j.outputs)
            worst[rounding] = max(worst[rounding], j.outputs[0].max_err_over_tol)
    assert worst[True] < 0.5 and worst[True] < worst[False], worst


def test_the_sensitivity_rounds_intermediate_values() -> None:
    """(x + 1e6) - 1e6 is x exactly, but every fp32 evaluation of it errs by up to u 1e6: the
    intermediate value's rounding, which the sensitivity now carries; a move of the inputs alone
    gives u |x|."""
    class Cancel(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x + 1e6) - 1e6

    x = randn(64, 64)
    sens = reference_pack(Cancel(), (x,))["numerics"]["outputs"]["out"]["sens"].double()
    ratio = sens / (x.double().abs() * numerics.UNIT_ROUNDOFF["fp32"])
    assert float(ratio.median()) > 1e5, float(ratio.median())


def test_the_sensitivity_leaves_exact_values_exact() -> None:
    """Buffers, factories, exact ops and integer values are not moved: a mask of ones compared
    with `== 1`, a `torch.ones` factory and an index computed in floating point keep selecting what
    they select, so the output moves only by its inputs' one-ulp move (a moved mask would zero the
    output, a moved index pick another column: a move of |x|)."""
    class Masked(nn.Module):
        def __init__(self, n: int) -> None:
            super().__init__()
            self.register_buffer("mask", torch.tril(torch.ones(n, n)))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            keep = (self.mask == 1) & (torch.ones(x.shape, dtype=x.dtype) == 1)
            idx = torch.floor(torch.arange(x.shape[1], dtype=x.dtype) * 1.0).long()
            return x.masked_fill(~keep, 0.0)[:, idx] * 1.0

    x = randn(32, 32)
    sens = reference_pack(Masked(32), (x,))["numerics"]["outputs"]["out"]["sens"].double()
    assert float((sens - 4 * numerics.U_ACC * x.double().abs()).max()) <= 0.0


def test_refined_sensitivity_is_the_rms_of_eight_draws_and_rescues_an_unlucky_one() -> None:
    """Replay 99's case at x200 with the stored one-draw sensitivity as unlucky as it gets (zero):
    the honest kernel's softmax is then a close rejection (~1.09x); `refine_sensitivity` puts the RMS
    of that draw and seven more in its place, once, and the kernel passes with a margin. A wrong
    kernel's gross failure is no close call, so nothing is re-drawn for it."""
    gen = torch.Generator().manual_seed(8)
    w = (torch.rand(300, 64, generator=gen) * 2 - 1) / 8
    b = (torch.rand(300, generator=gen) * 2 - 1) / 8
    x = heavy_tailed(torch.randn(40, 64, generator=gen) * 200, 8)
    model = LinearGeluSoftmax(w, b)
    num = numerics.build(model, "fp32")
    ref, _ = numerics.reference_trial(model, num, (x.clone(),), (x.clone(),), seed=SEED)
    assert ref is not None
    out = ref["numerics"]["outputs"]["out"]
    out["sens"] = out["sens"] * 0
    got = pack(sequential_linear_gelu_softmax(x, w, b), SEED)
    before = judge(ref, got, dtype="fp32", atol=1e-4, rtol=1e-4)
    assert before.close_call, before.outputs
    assert numerics.refine_sensitivity(num, (x,), ref, seed=SEED)
    assert not numerics.refine_sensitivity(num, (x,), ref, seed=SEED)  # once
    after = judge(ref, got, dtype="fp32", atol=1e-4, rtol=1e-4)
    assert after.mismatch is None and after.outputs[0].sens_draws == 8, after.outputs
    assert (after.outputs[0].max_err_over_tol or 0.0) < 0.5, after.outputs
    wrong = judge(ref, pack(softmax_plus_one(nn.functional.gelu(nn.functional.linear(x, w, b))), SEED),
                  dtype="fp32", atol=1e-4, rtol=1e-4)
    assert wrong.mismatch is not None and not wrong.close_call, wrong.outputs


def test_the_rounding_run_moves_results_by_one_unit_roundoff_a_slice_at_a_time(monkeypatch) -> None:
    """Each computed result moves by exactly +-u relative, in place a slice at a time (slices of 1000
    here), both signs drawn; its integer values stay, and the same seed moves it the same way."""
    monkeypatch.setattr(numerics.chunked, "CHUNK", 1000)
    x = torch.randn(4500, dtype=torch.float64)
    x[::7] = torch.arange(0, 4500, 7, dtype=torch.float64)  # integers after the op below too

    def run(seed: int) -> torch.Tensor:
        with torch.no_grad(), numerics._Rounding(numerics.U_ACC, seed):
            return x * 1.0

    moved = run(5)
    rel = (moved - x) / x.abs()
    ints = x == x.round()
    assert torch.equal(moved[ints], x[ints])
    assert torch.allclose(rel[~ints].abs(), torch.full_like(rel[~ints], numerics.U_ACC), rtol=1e-6)
    assert (rel[~ints] > 0).any() and (rel[~ints] < 0).any()
    assert torch.equal(run(5), moved) and not torch.equal(run(6), moved)
