"""Every cheat in the adversarial corpus (tests/fixtures/kernels/MANIFEST.json) through the real
`check()` pipeline (worker subprocesses, static scan, runtime checks, verdict): each must come back
with its expected status and, when rejected, with its expected rule named in the reasons.
CPU-runnable entries run here; GPU-only ones are marked `gpu` (run on the H200 with `-m gpu`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from kiln.tools.check import LocalEvaluator
from kiln.tools.records import CheckOptions, CheckRecord

FIXTURES = Path(__file__).parent.parent / "fixtures"
MANIFEST = FIXTURES / "kernels" / "MANIFEST.json"


def entries(gpu: bool) -> list[dict]:
    if not MANIFEST.exists():
        return []
    return [e for e in json.loads(MANIFEST.read_text()) if e["kind"] == "adversarial" and bool(e["gpu_only"]) == gpu]


def check_entry(e: dict, device: str) -> CheckRecord:
    opts = CheckOptions(device=device, trials=1, policy=e["policy"], timeout_s=120, compile_timeout_s=60,
                        correctness_timeout_s=30)
    return LocalEvaluator().check(FIXTURES / "problems" / f"{e['problem']}.py", FIXTURES / "kernels" / e["path"], opts)


def assert_caught(rec: CheckRecord, e: dict) -> None:
    allowed = {e["expect_status"], *e.get("accept_status", [])}
    assert rec.status in allowed, (e["path"], rec.status, rec.reasons)
    assert not rec.correct
    rule = e.get("expect_rule")
    findings = rec.integrity.findings if rec.integrity else []
    if rec.status == "rejected" and rule:
        named = [r for r in rec.reasons if r.startswith("rejected") and rule in r]
        assert named, (e["path"], rule, rec.reasons)
        assert any(f.rule == rule and f.severity == "reject" for f in findings)
    if rule and rule.startswith("static.") and rec.status != "rejected":  # e.g. a downcast: a finding
        assert any(f.rule == rule for f in findings), (e["path"], [f.rule for f in findings])


@pytest.mark.skipif(not MANIFEST.exists(), reason="corpus not present")
@pytest.mark.parametrize("entry", entries(gpu=False), ids=lambda e: f"{e['path']}-{e['policy']}")
def test_cheat_is_caught_on_cpu(entry: dict) -> None:
    rec = check_entry(entry, "cpu")
    if entry["expect_status"] == "ok":  # the same candidate is legitimate under the partial policy
        assert rec.status == "ok", rec.reasons
        return
    assert_caught(rec, entry)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("entry", entries(gpu=True), ids=lambda e: f"{e['path']}-{e['policy']}")
def test_cheat_is_caught_on_gpu(entry: dict) -> None:
    assert_caught(check_entry(entry, "cuda"), entry)
