"""The verdict: rejections by rule and policy, timing-integrity thresholds, physics, noise-aware
speedups, extra rounds, degenerate problems."""

from __future__ import annotations

import pytest

from kiln.tools.integrity import verdict
from kiln.tools.peaks import Peaks
from kiln.tools.records import (
    CheckRecord,
    DegenerateRecord,
    Finding,
    IntegrityRecord,
    PhysicsRecord,
    Speedup,
    TimingIntegrity,
    TimingRecord,
    TimingStat,
)


def record(status: str = "ok", findings: list[Finding] | None = None, policy: str = "partial", **integ) -> CheckRecord:
    return CheckRecord(problem="p.py", candidate="c.py", status=status, correct=status == "ok",  # type: ignore[arg-type]
                       integrity=IntegrityRecord(policy=policy, findings=findings or [], **integ))  # type: ignore[arg-type]


def timed(rec: CheckRecord, median_us: float, speedups: dict[str, tuple[float, float, float]] | None = None) -> CheckRecord:
    stat = TimingStat(median_us=median_us, ci_low_us=median_us * 0.99, ci_high_us=median_us * 1.01,
                      half_width_pct=1.0, n_samples=30)
    sp = {k: Speedup(baseline=k, value=v, ci_low=lo, ci_high=hi, verdict="faster") for k, (v, lo, hi) in (speedups or {}).items()}
    rec.timing = TimingRecord(measured=True, candidate=stat, speedups=sp)
    return rec


def test_clean_record_stays_ok() -> None:
    out = verdict.apply(record())
    assert out.status == "ok" and out.correct and out.reasons == []


def test_reject_finding_rejects_with_the_rule_in_the_reasons() -> None:
    f = Finding(rule="static.stream", severity="reject", evidence="torch.cuda.Stream", line=12)
    out = verdict.apply(record(findings=[f]))
    assert out.status == "rejected" and out.correct is False
    assert out.reasons[0].startswith("rejected: static.stream (line 12)")
    assert "before the integrity verdict: ok" in out.reasons


def test_warnings_do_not_reject() -> None:
    out = verdict.apply(record(findings=[Finding(rule="static.downcast", severity="warn", evidence="half")]))
    assert out.status == "ok"


def test_cheats_are_rejected_whatever_else_happened() -> None:
    f = Finding(rule="static.threads", severity="reject", evidence="threading")
    assert verdict.apply(record("unsupported", [f])).status == "rejected"  # a CUDA cheat on CPU
    crashed = verdict.apply(record("crashed", [f]))
    assert crashed.status == "rejected" and crashed.reasons[-1] == "before the integrity verdict: crashed"


def test_correctness_side_rules_make_a_candidate_incorrect() -> None:
    f = Finding(rule="correctness.input-mutation", severity="reject", evidence="changed its input")
    out = verdict.apply(record("incorrect", [f]))
    assert out.status == "incorrect" and not out.correct
    assert any("correctness.input-mutation" in r for r in out.reasons)


def test_strict_policy_escalates_cpp_torch_op() -> None:
    f = Finding(rule="static.cpp-torch-op", severity="warn", evidence="torch::softmax")
    assert verdict.apply(record(findings=[f])).status == "ok"
    assert verdict.apply(record(findings=[f], policy="strict")).status == "rejected"


def test_older_records_event_fields_no_longer_judge_and_rechecks_still_do() -> None:
    """Records from the event-timed harness still load; only what kiln's clock and audit measured judges."""
    old = TimingIntegrity(wall_over_event=8.0, threads_before=5, threads_after=6)
    assert verdict.judge_timing(old) == []
    ti = TimingIntegrity(timed_outputs_checked=16, timed_outputs_failed=2, audit_why="lap 2, slot 0: ...")
    assert {f.rule for f in verdict.judge_timing(ti)} == {"timing.recheck-failed"}


def test_faster_than_the_hardware_is_rejected() -> None:
    peaks = Peaks(copy_gbps=4000.0, matmul_tflops={"bf16": 700.0})
    phys = PhysicsRecord(bytes_moved=800_000_000)  # floor = 800e6 / (4000e9 * 1.25) s = 160 us
    out = verdict.apply(timed(record(physics=phys), 80.0), peaks=peaks)
    assert out.status == "rejected"
    assert out.reasons[0].startswith("rejected: faster than the hardware allows")
    assert out.integrity and out.integrity.physics and out.integrity.physics.floor_us == pytest.approx(160.0)


def test_a_kernel_at_90_percent_of_bandwidth_is_not_rejected() -> None:
    peaks = Peaks(copy_gbps=4000.0, matmul_tflops={"bf16": 700.0})
    phys = PhysicsRecord(bytes_moved=800_000_000)  # 200 us at 100% of the measured copy rate
    out = verdict.apply(timed(record(physics=phys), 200.0 / 0.9), peaks=peaks)
    assert out.status == "ok"
    assert out.integrity and out.integrity.physics and out.integrity.physics.pct_of_floor == pytest.approx(72.0)


def test_noise_aware_verdicts() -> None:
    rec = timed(record(), 100.0, {"eager": (1.3, 1.2, 1.4), "compile": (1.02, 0.97, 1.08), "eager_tf32": (0.8, 0.7, 0.9)})
    sp = verdict.apply(rec).timing.speedups  # type: ignore[union-attr]
    assert (sp["eager"].verdict, sp["compile"].verdict, sp["eager_tf32"].verdict) == ("faster", "tie", "slower")
    assert verdict.apply(rec, threshold=1.25).timing.speedups["eager"].verdict == "tie"  # type: ignore[union-attr]
    near = timed(record(), 100.0, {"eager": (1.004, 1.002, 1.006), "compile": (0.996, 0.994, 0.998)})
    sp = verdict.apply(near).timing.speedups  # type: ignore[union-attr]
    assert (sp["eager"].verdict, sp["compile"].verdict) == ("tie", "tie")  # inside the run-to-run spread


def test_big_speedups_need_an_extra_round() -> None:
    rec = timed(record(), 10.0, {"eager": (12.0, 11.0, 13.0)})
    assert verdict.needs_extra_round(rec)
    assert any("extra verification round" in r for r in verdict.apply(rec).reasons)
    assert not verdict.needs_extra_round(timed(record(), 10.0, {"eager": (3.0, 2.9, 3.1)}))


def test_degenerate_problem_is_reported_not_rejected() -> None:
    rec = record(degenerate=DegenerateRecord(degenerate=True, reasons=["degenerate.near-zero: max 0"]))
    out = verdict.apply(rec)
    assert out.status == "ok" and any("degenerate.near-zero" in r for r in out.reasons)


def test_record_round_trips_through_json() -> None:
    f = Finding(rule="runtime.decoy", severity="reject", evidence="k")
    out = verdict.apply(timed(record(findings=[f], timing=TimingIntegrity(wall_us=1.0, event_us=1.0, n_calls=1)), 5.0))
    assert CheckRecord.model_validate_json(out.model_dump_json()) == out


def test_apply_is_idempotent() -> None:
    peaks = Peaks(copy_gbps=4000.0, matmul_tflops={"bf16": 700.0})
    rec = timed(record(physics=PhysicsRecord(bytes_moved=800_000_000),
                       timing=TimingIntegrity(threads_before=1, threads_after=3)), 80.0, {"eager": (20.0, 19.0, 21.0)})
    once = verdict.apply(rec, peaks=peaks)
    assert verdict.apply(once, peaks=peaks) == once
