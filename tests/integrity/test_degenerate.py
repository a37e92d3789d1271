"""Degenerate problems are judged across the input draws a check makes (issue 16): losses and
whole-tensor norms that move with their inputs are not degenerate, though a scalar trivially
"equals itself"; constant, input-independent and (on their own inputs) near-zero problems are.
The draws are made exactly as the reference worker makes them (`numerics.reference_trial`);
weight independence is judged in the reference worker, where the model is at hand (`assess`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from kiln.tools import numerics
from kiln.tools.check.reference import Case
from kiln.tools.inputs import DISTRIBUTIONS, clone, derive_seed, fingerprint, make_inputs, trial_count
from kiln.tools.integrity.degenerate import assess, assess_packs, digest, draws

DATA = Path(__file__).parent / "data" / "degenerate"
SECRET = 424242
LOSSES = ["mse_loss", "hinge_loss", "kl_div_loss", "cross_entropy_loss", "frobenius_norm",
          "cosine_similarity_loss", "triplet_margin_loss", "smooth_l1_loss"]


def reference_digests(name: str, *, trials: int = 2) -> list[tuple[str, dict]]:
    """The reference's outputs for the draws the parent compares, made as the reference worker makes
    them (`Case`, `numerics.reference_trial`) and digested as the parent digests them."""
    path = str(DATA / f"{name}.py")
    c = Case(path, path, init_seed=derive_seed(SECRET, "init"), model_seed=derive_seed(SECRET, "model"),
             dtype="fp32", device="cpu")
    num = numerics.build(c.model, "fp32")
    packs, fps = {}, {}
    for dist in DISTRIBUTIONS:
        for trial in range(trial_count(dist, trials)):
            x = make_inputs(c.mod.get_inputs, secret=SECRET, case="problem", dist=dist, trial=trial, dtype="fp32",
                            device="cpu")
            packed, _why = numerics.reference_trial(c.model, num, clone(x), x, seed=derive_seed(SECRET, dist, trial),
                                                    drop_nonfinite=DISTRIBUTIONS[dist].wide and trial == 0)
            if packed is None:
                break
            packs[(dist, trial)], fps[(dist, trial)] = packed, fingerprint(x)
    return [(d, digest(packs[(d, t)])) for d, t in draws(list(DISTRIBUTIONS), fps)]


def reasons(name: str, *, numerics_rule: bool = True) -> list[str]:
    rec = assess_packs(reference_digests(name), dtype="fp32", atol=1e-4, rtol=1e-4, numerics=numerics_rule)
    assert rec.degenerate == bool(rec.reasons)
    return [r.split(":")[0] for r in rec.reasons]


@pytest.mark.parametrize("name", LOSSES)
def test_a_loss_or_norm_that_moves_with_its_inputs_is_not_degenerate(name: str) -> None:
    assert reasons(name) == []


@pytest.mark.parametrize("numerics_rule", [True, False])
def test_mse_loss_is_not_degenerate_under_either_rule(numerics_rule: bool) -> None:
    """KernelBench's 94_MSELoss was flagged `degenerate.constant` by the within-output test."""
    assert reasons("mse_loss", numerics_rule=numerics_rule) == []


@pytest.mark.parametrize(("name", "expected"), [
    ("constant_softmax", ["degenerate.constant"]),
    ("constant_loss", ["degenerate.constant"]),
    ("weights_only", ["degenerate.input-independent"]),
    ("relu_of_negated", ["degenerate.near-zero"]),
    ("long_softmax", ["degenerate.near-zero"]),
])
def test_degenerate_problems_are_flagged(name: str, expected: list[str]) -> None:
    assert reasons(name) == expected


def test_draws_skip_repeats_of_the_first_input_and_what_the_reference_never_made() -> None:
    fps = {("x1", 0): [1.0], ("x1", 1): [2.0], ("x3", 0): [3.0], ("heavy", 0): [1.0]}
    assert draws(["x1", "x3", "neg", "heavy"], fps) == [("x1", 0), ("x3", 0), ("x1", 1)]


# ----------------------------------------------------------------------------- weight independence


class Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


class WeightFree(Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        return (y - y.mean()) / y.std() * 0 + x.mean(1, keepdim=True)


def build(cls: type[nn.Module]):  # noqa: ANN201
    def make(seed: int) -> nn.Module:
        torch.manual_seed(seed)
        return cls()

    return make


def inputs(seed: int) -> tuple:
    return (torch.rand(16, 32, generator=torch.Generator().manual_seed(seed)),)


def test_weight_independence_is_judged_in_the_reference_worker() -> None:
    assert assess(build(Linear), inputs).reasons == []
    rec = assess(build(WeightFree), inputs)
    assert rec.degenerate and [r.split(":")[0] for r in rec.reasons] == ["degenerate.weight-independent"]
