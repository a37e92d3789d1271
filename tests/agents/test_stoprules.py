"""The stop rules are one rule each: the graph's hard rules, the LLM Judge's rules and the built-in
Judge agree on "target met" (the speedup's CI low end reaches it, not its median) and on "at the
roofline". Before kiln.agents.stoprules the two Judges read the median, so a kernel at 1.10x whose
CI reached down to 0.95x stopped a run as "target met" against a 1.0x target that the graph said
was not met."""

from __future__ import annotations

from kiln.agents.base import GpuFacts
from kiln.agents.builtin.judge import BuiltinJudge
from kiln.agents.judge import enforce_rules, rule_decision
from kiln.agents.stoprules import at_roofline, target_met
from kiln.graphs import rules
from kiln.graphs.context import RunOptions
from kiln.graphs.state import Candidate
from kiln.tools.records import IntegrityRecord, PhysicsRecord, Speedup, TimingRecord, TimingStat

from .helpers import judge_input

GPU = GpuFacts(device="cuda", name="gpu")
OPTS = RunOptions(problem="/p.py", target_speedup=1.0)


def _timed(value: float, low: float, pct: float | None = None, **kw):
    stat = TimingStat(median_us=10, ci_low_us=9, ci_high_us=11, half_width_pct=1, n_samples=30)
    inp = judge_input(gpu=GPU, best_speedup=value, best_speedup_ci_low=low, target_speedup=1.0,
                      stress_passed=True, **kw)
    inp.check.timing = TimingRecord(measured=True, method="events", candidate=stat, speedups={
        "eager": Speedup(baseline="eager", value=value, ci_low=low, ci_high=value * 1.1, verdict="tie")})
    if pct is not None:
        inp.check.integrity = IntegrityRecord(physics=PhysicsRecord(floor_us=pct / 10, measured_us=10.0,
                                                                    pct_of_floor=pct))
    return inp


def _cand(value: float, low: float, pct: float | None = None) -> Candidate:
    return Candidate(id="c1", iteration=1, mode="generate", correct=True, speedup_vs_eager=value,
                     speedup_eager_ci_low=low, pct_of_roofline=pct)


def _builtin_stop(inp) -> str | None:
    d = BuiltinJudge().decide(inp)
    return d.stop_reason if d.next == "stop" else None


def test_a_median_above_the_target_with_its_ci_below_is_not_met_anywhere():
    inp = _timed(1.10, 0.95)
    assert not target_met(1.10, 0.95, 1.0)
    assert rules.target_met(_cand(1.10, 0.95), OPTS) == (False, "")
    assert rule_decision(inp, no_progress_k=4) is None  # the LLM Judge's rules: no stop
    assert _builtin_stop(inp) != "target met"  # the built-in Judge: no stop on the median
    asked = enforce_rules(BuiltinJudge().decide(_timed(1.10, 0.95)).model_copy(update={"next": "stop"}), inp)
    assert asked.next == "optimize" and "target not met" in (asked.overridden or "")


def test_the_ci_low_end_at_the_target_is_met_everywhere():
    inp = _timed(1.10, 1.02)
    assert target_met(1.10, 1.02, 1.0)
    assert rules.target_met(_cand(1.10, 1.02), OPTS)[0]
    d = rule_decision(inp, no_progress_k=4)
    assert d is not None and d.next == "stop" and "target met" in (d.stop_reason or "")
    assert _builtin_stop(inp) == "target met"


def test_speed_not_measured_counts_as_met_and_an_untimed_baseline_does_not():
    assert target_met(None, None, 2.0, measured=False)
    assert not target_met(None, None, 2.0)
    assert rules.target_met(Candidate(id="c1", iteration=1, mode="generate", correct=True), OPTS)[0]


def test_the_roofline_rule_is_one_threshold():
    assert at_roofline(90.0) and not at_roofline(89.9) and not at_roofline(None)
    assert not at_roofline(95.0, floors_differ=True)
    assert rules.at_roofline(_cand(0.5, 0.4, pct=92.0), OPTS)[0]
    assert not rules.at_roofline(_cand(0.5, 0.4, pct=85.0), OPTS)[0]
    d = rule_decision(_timed(0.5, 0.4, pct=92.0), no_progress_k=4)
    assert d is not None and d.next == "stop" and "92% of the roofline" in (d.stop_reason or "")
    assert rule_decision(_timed(0.5, 0.4, pct=85.0), no_progress_k=4) is None
    assert _builtin_stop(_timed(0.5, 0.4, pct=92.0)) == "near roofline"
