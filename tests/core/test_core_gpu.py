"""The check pipeline on a CUDA GPU (run on the H200 with `-m gpu`): the corpus's GPU entries, an
illegal memory access contained with the next check still fine, the timing path, CUDA poisoning."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln.tools.check import LocalEvaluator, check
from kiln.tools.records import CheckOptions

from .test_corpus_check import FIXTURES, MANIFEST, assert_expected, check_entry, entries

pytestmark = pytest.mark.gpu
PROBLEMS = FIXTURES / "problems"
KERNELS = FIXTURES / "kernels"


@pytest.fixture(scope="module")
def evaluator() -> LocalEvaluator:
    return LocalEvaluator()


@pytest.mark.skipif(not MANIFEST.exists(), reason="corpus not present")
@pytest.mark.parametrize("entry", entries(gpu=True) + entries(gpu=False), ids=lambda e: e["path"])
def test_corpus_entry_on_gpu(evaluator: LocalEvaluator, entry: dict) -> None:
    assert_expected(check_entry(evaluator, entry, "cuda"), entry)


def test_illegal_address_is_contained_and_the_next_check_runs(evaluator: LocalEvaluator) -> None:
    opts = CheckOptions(device="cuda", trials=1, time=False, timeout_s=120)
    bad = evaluator.check(PROBLEMS / "relu.py", KERNELS / "crashing/cuda/illegal_address_fast.py", opts)
    assert bad.status == "crashed" and "illegal memory access" in " ".join(bad.reasons + [bad.stderr_tail]).lower()
    good = evaluator.check(PROBLEMS / "relu.py", KERNELS / "correct/triton/relu.py", opts)
    assert good.status == "ok", good.reasons


def test_timing_path_measures_speedups_for_a_correct_triton_kernel() -> None:
    rec = check(PROBLEMS / "row_softmax.py", KERNELS / "correct/triton/row_softmax.py",
                CheckOptions(device="cuda", trials=2, timeout_s=300))
    assert rec.status == "ok", rec.reasons
    t = rec.timing
    assert t is not None and t.measured and t.candidate and t.candidate.n_samples >= 7  # laps
    assert "eager" in t.speedups and t.speedups["eager"].value > 0
    assert t.memory.candidate_peak_bytes and t.env and t.env.gpu_name
    assert rec.integrity and rec.integrity.timing and rec.integrity.timing.timed_outputs_checked > 0
    assert rec.integrity.timing.timed_outputs_failed == 0
    assert {"spawn", "compile", "correctness", "timing"} <= set(rec.stages_s)


def test_unwritten_output_shows_as_nan_on_cuda() -> None:
    rec = check(PROBLEMS / "row_softmax.py", KERNELS / "wrong/triton/row_softmax_last_col_unwritten.py",
                CheckOptions(device="cuda", trials=1, timeout_s=120))
    assert rec.status == "incorrect" and rec.correctness and rec.correctness.first_failure
    assert "nan" in rec.correctness.first_failure.lower()


def test_wrong_candidate_is_not_timed(tmp_path: Path) -> None:
    rec = check(PROBLEMS / "relu.py", KERNELS / "wrong/cuda/relu_fast_floor_grid.py",
                CheckOptions(device="cuda", trials=1, timeout_s=120))
    assert rec.status == "incorrect" and rec.timing and not rec.timing.measured


def test_running_the_gpu_out_of_memory_is_reported_as_such() -> None:
    """In the sandbox torch's out-of-memory message asks NVML for the GPU's processes, is refused,
    and raises `NVML_SUCCESS == r INTERNAL ASSERT FAILED` instead (H200, 2026-12-01)."""
    data = Path(__file__).parent / "data"
    rec = check(data / "add_problem.py", data / "oom_cuda.py", CheckOptions(device="cuda", trials=1, time=False))
    assert rec.status == "crashed", rec.reasons
    assert "CUDA out of memory" in " ".join(rec.reasons), rec.reasons


def test_an_honest_softmax_of_32_million_outputs_passes() -> None:
    """8192 x 4000 = 32,768,000 outputs, above 2^24: every position sampler is exact there (issue 22)."""
    rec = check(Path(__file__).parent / "data" / "softmax_8192x4000.py", KERNELS / "correct/triton/row_softmax.py",
                CheckOptions(device="cuda", timeout_s=300))
    assert rec.status == "ok", (rec.reasons, rec.stderr_tail[-1500:])
    assert rec.timing and rec.timing.measured and rec.integrity.timing.timed_outputs_failed == 0
