"""The corpus (tests/fixtures/kernels/MANIFEST.json) through `check()` on CPU: correct kernels pass,
wrong ones fail with the named diagnosis, crashing ones come back as records and the evaluator goes
on. Adversarial kernels are the integrity checks' corpus (tests/integrity). GPU-only entries run in
tests/core/test_core_gpu.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kiln.tools.check import LocalEvaluator
from kiln.tools.records import CheckOptions, CheckRecord

FIXTURES = Path(__file__).parent.parent / "fixtures"
MANIFEST = FIXTURES / "kernels" / "MANIFEST.json"
KINDS = ("correct", "wrong", "crashing")


def entries(kinds: tuple[str, ...] = KINDS, gpu: bool = False) -> list[dict]:
    if not MANIFEST.exists():
        return []
    return [e for e in json.loads(MANIFEST.read_text()) if e["kind"] in kinds and bool(e["gpu_only"]) == gpu]


def report_text(rec: CheckRecord) -> str:
    """Everything a reader of the record sees: reasons, the Coder paragraph, compile errors, stderr."""
    parts = list(rec.reasons)
    if rec.correctness and rec.correctness.first_failure:
        parts.append(rec.correctness.first_failure)
    if rec.compile:
        parts += rec.compile.errors + [rec.compile.log_tail]
    parts.append(rec.stderr_tail)
    return "\n".join(parts).lower()


def check_entry(ev: LocalEvaluator, e: dict, device: str) -> CheckRecord:
    # a hang is caught by the stage deadline: short ones on CPU keep the suite fast; Triton JIT and
    # load_inline builds on a GPU need the longer compile budget
    compile_s = 10.0 if device == "cpu" else 120.0
    # timing is not what this corpus tests (test_core_gpu times one kernel): leave it out to keep the
    # GPU run inside one device command
    # correctness: 7 trials (4 basic distributions, 3 wide ones) of 2 calls each; under the interpreter one
    # call of the larger fixtures takes ~1.5-3 s on a loaded 2-core machine, and a hang still ends within 90 s
    opts = CheckOptions(device=device, trials=1, policy=e["policy"], timeout_s=180, compile_timeout_s=compile_s,
                        correctness_timeout_s=90, time=False, run_rejected=e["kind"] == "crashing")
    return ev.check(FIXTURES / "problems" / f"{e['problem']}.py", FIXTURES / "kernels" / e["path"], opts)


def assert_expected(rec: CheckRecord, e: dict) -> None:
    allowed = {e["expect_status"], *e.get("accept_status", [])}
    assert rec.status in allowed, (e["path"], rec.status, rec.reasons)
    if e.get("expect_reason"):
        assert e["expect_reason"].lower() in report_text(rec), (e["path"], report_text(rec)[:2000])
    if e["expect_status"] == "ok":
        assert rec.correct and rec.correctness and rec.correctness.passed


@pytest.fixture(scope="module")
def evaluator() -> LocalEvaluator:
    return LocalEvaluator()


@pytest.mark.skipif(not MANIFEST.exists(), reason="corpus not present")
@pytest.mark.parametrize("entry", entries(), ids=lambda e: e["path"])
def test_corpus_entry_on_cpu(evaluator: LocalEvaluator, entry: dict) -> None:
    assert_expected(check_entry(evaluator, entry, "cpu"), entry)
