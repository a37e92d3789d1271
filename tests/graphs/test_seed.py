"""`kiln run --seed`: a fixed seed reaches every check, so feedback (and a cached LLM run) repeats."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from kiln.graphs.checks import check_options
from kiln.graphs.context import RunContext, RunOptions
from kiln.tools.check import LocalEvaluator, check

FIX = Path(__file__).parents[1] / "fixtures"


def test_seed_reaches_check_options(tmp_path: Path) -> None:
    ctx = RunContext(options=RunOptions(problem="p.py", seed=1234), run_dir=tmp_path, coder=None, judge=None,
                     proposer=None, evaluator=LocalEvaluator())
    assert check_options(ctx, []).seed == 1234
    unseeded = dataclasses.replace(ctx, options=RunOptions(problem="p.py"))
    assert check_options(unseeded, []).seed is None


def test_fixed_seed_gives_identical_feedback() -> None:
    problem = FIX / "problems" / "elementwise_gelu.py"
    wrong = FIX / "kernels" / "wrong" / "triton" / "elementwise_gelu_missing_scale.py"
    ctx = RunContext(options=RunOptions(problem=str(problem), seed=7, trials=1), run_dir=Path("."), coder=None,
                     judge=None, proposer=None, evaluator=LocalEvaluator())
    first = check(problem, wrong, check_options(ctx, []).model_copy(update={"device": "cpu"}))
    again = check(problem, wrong, check_options(ctx, []).model_copy(update={"device": "cpu"}))
    assert first.status == again.status == "incorrect"
    assert first.correctness.first_failure == again.correctness.first_failure
