"""The built-in Judge's rules, on check records as the check pipeline writes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln.agents.base import CoderTask, JudgeInput
from kiln.agents.builtin import BuiltinCoder, BuiltinJudge, space
from kiln.agents.builtin.source import analyze, render
from kiln.tools.profile.records import KernelProfile, ProfileFinding, ProfileReport
from kiln.tools.records import (
    CheckRecord,
    CompileRecord,
    CorrectnessRecord,
    Finding,
    IntegrityRecord,
    PhysicsRecord,
    Speedup,
    TimingRecord,
    TimingStat,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


SRC = (EXAMPLES / "softmax.py").read_text()


def _cand() -> str:
    reply = BuiltinCoder().write(CoderTask(mode="generate", problem_name="softmax", problem_src=SRC))
    assert reply.source is not None
    return reply.source


def _timed(pct: float | None, speedup: float = 1.2) -> CheckRecord:
    stat = TimingStat(median_us=100.0, ci_low_us=99.0, ci_high_us=101.0, half_width_pct=1.0, n_samples=40)
    sp = Speedup(baseline="eager", value=speedup, ci_low=speedup * 0.99, ci_high=speedup * 1.01, verdict="faster")
    timing = TimingRecord(measured=True, candidate=stat, speedups={"eager": sp})
    phys = PhysicsRecord(bytes_moved=400_000_000, pct_of_floor=pct) if pct is not None else None
    return CheckRecord(problem="p", candidate="c", status="ok", correct=True, timing=timing,
                       integrity=IntegrityRecord(physics=phys))  # fmt: skip


def _inp(check: CheckRecord, **kw) -> JudgeInput:
    return JudgeInput(problem_name="softmax", problem_src=SRC, candidate_src=kw.pop("src", _cand()), check=check, **kw)


def test_compile_error_is_repaired_with_the_error_in_the_plan() -> None:
    rec = CheckRecord(problem="p", candidate="c", status="compile_error",
                      compile=CompileRecord(ok=False, errors=["cand.py:12: out of resource: shared memory"]))  # fmt: skip
    d = BuiltinJudge().decide(_inp(rec))
    assert d.next == "repair" and d.mode == "correction"
    assert "out of resource" in d.plan and d.evidence == ["cand.py:12: out of resource: shared memory"]


def test_mismatch_is_repaired_with_the_report() -> None:
    corr = CorrectnessRecord(atol=1e-4, rtol=1e-4, n_trials=8, n_passed=5, first_failure="case dim_513: out[0, 512] 0.1 vs 0.2")
    rec = CheckRecord(problem="p", candidate="c", status="incorrect", correctness=corr)
    d = BuiltinJudge().decide(_inp(rec))
    assert d.next == "repair" and "dim_513" in d.plan and d.evidence == ["5/8 trials passed"]


def test_integrity_rejection_is_repaired_and_names_the_rule() -> None:
    f = Finding(rule="runtime.torch-compute", severity="reject", evidence="aten::softmax in forward")
    rec = CheckRecord(problem="p", candidate="c", status="rejected", integrity=IntegrityRecord(findings=[f]))
    d = BuiltinJudge().decide(_inp(rec))
    assert d.next == "repair" and "runtime.torch-compute" in d.plan


def test_a_failing_kernel_is_never_stopped_as_solved() -> None:
    rec = CheckRecord(problem="p", candidate="c", status="crashed", stderr_tail="illegal memory access")
    for stale in range(12):
        d = BuiltinJudge().decide(_inp(rec, iters_without_progress=stale, best_speedup=3.0))
        assert d.next in ("repair", "stop")
        assert d.next == "repair" or "fails" in (d.stop_reason or "")


def test_cpu_pass_is_stress_tested_then_stops() -> None:
    rec = CheckRecord(problem="p", candidate="c", status="ok", correct=True,
                      timing=TimingRecord(measured=False, reason="not measured (no GPU)"))  # fmt: skip
    assert BuiltinJudge().decide(_inp(rec)).next == "stress"
    d = BuiltinJudge().decide(_inp(rec, stress_passed=True, stress_cases=3))
    assert d.next == "stop" and "not measured" in (d.stop_reason or "")


def test_near_roofline_stops_and_below_it_optimizes_one_knob() -> None:
    j = BuiltinJudge()
    d = j.decide(_inp(_timed(94.0), stress_passed=True, stress_cases=2, target_speedup=10.0))
    assert d.next == "stop" and d.stop_reason == "near roofline" and "94% of roofline" in d.evidence
    d = j.decide(_inp(_timed(60.0), stress_passed=True, stress_cases=2, target_speedup=10.0))
    assert d.next == "optimize" and d.mode == "optimization" and d.bottleneck == "memory bandwidth"
    assert "knob: " in d.plan and "60% of roofline" in d.evidence


def test_passing_kernel_is_stressed_before_optimizing() -> None:
    d = BuiltinJudge().decide(_inp(_timed(50.0), target_speedup=10.0))
    assert d.next == "stress"


@pytest.mark.parametrize(("kw", "reason"), [
    ({"target_speedup": 1.1}, "target met"),
    ({"target_speedup": 10.0, "iters_without_progress": 4}, "no progress"),
])  # fmt: skip
def test_stop_rules(kw: dict, reason: str) -> None:
    d = BuiltinJudge().decide(_inp(_timed(50.0, speedup=1.2), stress_passed=True, stress_cases=1, **kw))
    assert d.next == "stop" and d.stop_reason == reason


def test_exhausted_search_stops() -> None:
    an = analyze(SRC)
    visited = {space.key(c) for c in space.all_configs("row")[: space.MAX_VISITED]}
    src = render(an, space.DEFAULTS["row"], visited)
    d = BuiltinJudge().decide(_inp(_timed(50.0), src=src, stress_passed=True, target_speedup=10.0))
    assert d.next == "stop" and d.stop_reason == "search exhausted"


def test_spills_in_the_profile_ask_for_smaller_tiles() -> None:
    k = KernelProfile(name="k", registers_per_thread=255, spill_bytes=1024, dram_pct=61.0)
    d = BuiltinJudge().decide(_inp(_timed(None), stress_passed=True, target_speedup=10.0, profile=_report(k)))
    assert d.next == "optimize" and "knob: tile down" in d.plan and "61% of roofline" in d.evidence


def test_a_spill_finding_alone_asks_for_smaller_tiles() -> None:
    """A compile-only profile may know of spills only from the SASS (LDL/STL), as the profiler's finding."""
    k = KernelProfile(name="k", findings=[ProfileFinding(rule="registers.spills", message="register spills: 4 LDL/STL")])
    d = BuiltinJudge().decide(_inp(_timed(None), stress_passed=True, target_speedup=10.0, profile=_report(k)))
    assert d.next == "optimize" and "knob: tile down" in d.plan


def test_the_profile_roofline_is_read_not_the_l1_percentage() -> None:
    """The main kernel's roofline %, typed: zero spills, L1 % lower than it."""
    k = KernelProfile(name="k", duration_us=140.0, spill_bytes=0, dram_pct=71.0, l2_pct=40.0, l1_pct=12.0,
                      bound="memory", roofline_pct=71.0, headroom_x=1.4)
    d = BuiltinJudge().decide(_inp(_timed(None), stress_passed=True, target_speedup=10.0, profile=_report(k)))
    assert d.next == "optimize" and "71% of roofline" in d.evidence and "knob: tile down" not in d.plan
    near = k.model_copy(update={"roofline_pct": 93.0, "near_limit": True})
    d = BuiltinJudge().decide(_inp(_timed(None), stress_passed=True, target_speedup=10.0, profile=_report(near)))
    assert d.next == "stop" and d.stop_reason == "near roofline"


def test_the_judge_reads_the_main_kernel_not_a_later_one() -> None:
    """The slowest kernel comes first; a small kernel's numbers after it do not decide."""
    main = KernelProfile(name="main", duration_us=140.0, bound="memory", roofline_pct=40.0)
    tail = KernelProfile(name="tail", duration_us=3.0, bound="memory", roofline_pct=95.0, near_limit=True)
    d = BuiltinJudge().decide(_inp(_timed(None), stress_passed=True, target_speedup=10.0, profile=_report(main, tail)))
    assert d.next == "optimize" and "40% of roofline" in d.evidence


def _report(*kernels: KernelProfile) -> ProfileReport:
    return ProfileReport(source="ncu", candidate="c.py", kernels=list(kernels))
