"""The Coder's few-shot examples are runnable kernels, checked by kiln's own checker."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kiln.agents.casecheck import problem_ops
from kiln.agents.prompts import example_paths
from kiln.tools.check import check
from kiln.tools.records import CheckOptions


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()

EXAMPLES = example_paths()
IDS = [cand.stem for _, cand, _ in EXAMPLES]


def test_every_example_names_its_problem():
    for lang, cand, prob in EXAMPLES:
        header = cand.read_text().splitlines()[0]
        assert f"problem: problems/{prob.name}" in header and f"lang: {lang}" in header


@pytest.mark.parametrize("lang,cand,prob", [e for e in EXAMPLES if e[0] == "triton"],
                         ids=[i for i, e in zip(IDS, EXAMPLES, strict=True) if e[0] == "triton"])
def test_triton_examples_are_correct_on_cpu(lang, cand, prob):
    rec = check(prob, cand, CheckOptions(device="cpu", trials=2))
    assert rec.compile is not None and rec.compile.ok, rec.compile
    assert rec.correctness is not None and rec.correctness.passed, rec.correctness.first_failure
    assert rec.correctness.n_trials >= 2
    assert rec.status == "ok" and rec.correct, (rec.status, rec.reasons)  # integrity verdict included


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("lang,cand,prob", [e for e in EXAMPLES if e[0] == "cuda"],
                         ids=[i for i, e in zip(IDS, EXAMPLES, strict=True) if e[0] == "cuda"])
def test_cuda_examples_compile_with_nvcc(lang, cand, prob):
    rec = check(prob, cand, CheckOptions(device="cpu", trials=1))
    assert rec.compile is not None and rec.compile.ok, rec.compile.errors
    assert rec.compile.backend.startswith("nvcc-check")
    assert [f for f in rec.integrity.findings if f.severity == "reject"] == []


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("lang,cand,prob", EXAMPLES, ids=IDS)
def test_examples_pass_the_full_check_on_gpu(lang, cand, prob):
    rec = check(prob, cand, CheckOptions(device="cuda", trials=3))
    assert rec.status == "ok" and rec.correct, (rec.status, rec.reasons)


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU")
def test_gpu_facts_read_from_the_h200():
    from kiln.agents.gpufacts import read_gpu_facts

    facts = read_gpu_facts("cuda")
    assert facts.device == "cuda" and facts.sm_count and facts.sm_count > 0
    assert facts.smem_per_sm_bytes and facts.l2_bytes and facts.capability
    assert facts.copy_gbps and facts.copy_gbps > 100  # measured by kiln's peak probe, then cached


KB_OPS = json.loads((Path(__file__).parents[1] / "fixtures" / "kernelbench_ops.json").read_text())


def overlaps(ops: dict[str, list[str]]) -> list[str]:
    """KernelBench problems whose op signature is close to `ops`: the same heavy calls (Jaccard >= 0.5),
    or, for pure arithmetic, nearly the same operators (Jaccard >= 0.6)."""
    def jaccard(a: set, b: set) -> float:
        return len(a & b) / len(a | b) if a | b else 1.0

    out = []
    for name, kb in KB_OPS.items():
        mine, theirs = set(ops["heavy"]), set(kb["heavy"])
        if mine and theirs and jaccard(mine, theirs) >= 0.5 or not mine and not theirs and jaccard(set(ops["arith"]), set(kb["arith"])) >= 0.6:
            out.append(name)
    return out


def test_the_overlap_measure_catches_the_old_examples():
    """softmax, Linear+GELU and ReLU were the old few-shots: each is (nearly) a KernelBench problem."""
    assert "level1/23_Softmax" in overlaps({"heavy": ["softmax"], "arith": []})
    assert "level2/86_Matmul_Divide_GELU" in overlaps({"heavy": ["gelu", "linear"], "arith": []})
    assert "level1/19_ReLU" in overlaps({"heavy": ["relu"], "arith": []})
    assert len(KB_OPS) == 200


@pytest.mark.parametrize("lang,cand,prob", EXAMPLES, ids=IDS)
def test_no_example_overlaps_kernelbench(lang, cand, prob):
    assert overlaps(problem_ops(prob.read_text())) == []
