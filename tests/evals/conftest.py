"""Helpers for batch tests: a run directory filled through the real store."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln.evals.batch.jobs import BatchConfig, outcome_from_record
from kiln.evals.batch.store import ResultStore
from kiln.tools.records import (
    CheckRecord,
    CompileRecord,
    EnvRecord,
    Finding,
    IntegrityRecord,
    Speedup,
    TimingRecord,
    TimingStat,
)


def stat(us: float) -> TimingStat:
    return TimingStat(median_us=us, ci_low_us=us * 0.99, ci_high_us=us * 1.01, half_width_pct=1.0, n_samples=30)


def record(problem: str, status: str, speedup: float | None = None, rule: str | None = None) -> CheckRecord:
    timing = None
    if speedup is not None:
        sp = {b: Speedup(baseline=b, value=speedup, ci_low=speedup * 0.97, ci_high=speedup * 1.03,
                         verdict="faster" if speedup * 0.97 > 1 else "tie") for b in ("eager", "eager_tf32", "compile")}
        timing = TimingRecord(measured=True, candidate=stat(100.0), baselines={"eager": stat(100.0 * speedup)},
                              speedups=sp, env=EnvRecord(device="cuda:0", gpu_name="NVIDIA H200", driver="580.1",
                                                         torch="2.11.0", triton="3.6.0", python="3.12"))
    integrity = IntegrityRecord(findings=[Finding(rule=rule, severity="reject", evidence="x")]) if rule else None
    return CheckRecord(problem=problem, candidate=f"{problem}.py", device="cuda:0" if timing else "cpu",
                       status=status, correct=status == "ok", compile=CompileRecord(ok=status != "compile_error"),
                       timing=timing, integrity=integrity, reasons=[rule] if rule else [])


@pytest.fixture
def filled_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    store = ResultStore(run / "results.sqlite")
    store.set_meta("config", BatchConfig(mode="oneshot", samples=1).model_dump())
    cases = [("level1/19_ReLU", "ok", 1.8, None), ("level1/23_Softmax", "ok", 0.7, None),
             ("level1/40_LayerNorm", "rejected", None, "static.stream"), ("level1/54_conv", "compile_error", None, None)]
    for problem, status, speedup, rule in cases:
        rec = record(problem, status, speedup, rule)
        kernel = run / f"{problem.replace('/', '__')}.py"
        kernel.write_text("# kernel\n")
        store.add_candidate(problem, 0, 0, rec, str(kernel))
        store.finish_sample(outcome_from_record(problem, 0, rec), str(kernel) if rec.correct else None)
    store.close()
    return run
