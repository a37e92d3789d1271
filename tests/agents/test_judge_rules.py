"""The Judge's hard rules, with a scripted chat model behind the real LLMJudge."""

from __future__ import annotations

from kiln.agents.base import GpuFacts
from kiln.agents.judge import LLMJudge
from kiln.agents.llm.client import LLMClient
from kiln.agents.llm.redact import Redactor
from kiln.agents.llm.scripted import ScriptedChatModel
from kiln.agents.llm.transport import TransportSettings
from kiln.agents.llm.usage import UsageTracker
from kiln.tools.records import PhysicsRecord, Speedup, TimingRecord, TimingStat

from .helpers import judge_input

GPU = GpuFacts(device="cuda", name="gpu")


def verdict(next_: str, mode: str = "optimization", stop_reason: str | None = None) -> dict:
    return {"structured": {"mode": mode, "diagnosis": "diag", "bottleneck": "memory bandwidth",
                           "evidence": ["DRAM 41% of peak"], "plan": "vectorize loads", "next": next_,
                           "stop_reason": stop_reason}}


def judge(*replies, k: int = 3) -> tuple[LLMJudge, ScriptedChatModel]:
    model = ScriptedChatModel(replies=list(replies))
    client = LLMClient("judge", model, model_name="scripted", tracker=UsageTracker(), redactor=Redactor(),
                       settings=TransportSettings(backoff_base_s=0.0))
    return LLMJudge(client, no_progress_k=k), model


def timed(inp, speedup: float):
    stat = TimingStat(median_us=10, ci_low_us=9, ci_high_us=11, half_width_pct=1, n_samples=30)
    inp.check.timing = TimingRecord(measured=True, method="events", candidate=stat, speedups={
        "eager": Speedup(baseline="eager", value=speedup, ci_low=speedup * 0.98, ci_high=speedup * 1.02,
                         verdict="faster")})
    return inp


def test_never_stops_as_solved_with_a_failing_kernel():
    j, _ = judge(verdict("stop", "correction", "looks done"))
    d = j.decide(judge_input(correct=False))
    assert d.next == "repair" and d.mode == "correction" and d.stop_reason is None
    assert "fails a check" in d.overridden


def test_cannot_optimize_or_stress_a_failing_kernel():
    j, _ = judge(verdict("optimize"), verdict("stress"))
    assert j.decide(judge_input(correct=False)).next == "repair"
    assert j.decide(judge_input(correct=False)).next == "repair"


def test_optimize_decision_passes_through_with_its_evidence():
    j, _ = judge(verdict("optimize"))
    d = j.decide(timed(judge_input(gpu=GPU, best_speedup=1.1, target_speedup=2.0), 1.1))
    assert d.next == "optimize" and d.bottleneck == "memory bandwidth" and d.evidence == ["DRAM 41% of peak"]
    assert d.overridden is None and d.usage.role == "judge" and d.usage.input_tokens > 0


def test_stop_needs_stress_tests_then_the_target():
    j, _ = judge(verdict("stop", stop_reason="fast"), verdict("stop", stop_reason="fast"))
    d = j.decide(timed(judge_input(gpu=GPU, best_speedup=3.0, target_speedup=2.0), 3.0))
    assert d.next == "stress" and "stress tests" in d.overridden
    d = j.decide(timed(judge_input(gpu=GPU, best_speedup=1.2, target_speedup=2.0, stress_passed=True), 1.2))
    assert d.next == "optimize" and "target not met" in d.overridden


def test_rule_stops_need_no_model_call():
    j, model = judge()  # no replies: any model call would fail the test
    d = j.decide(timed(judge_input(gpu=GPU, best_speedup=2.5, target_speedup=2.0, stress_passed=True), 2.5))
    assert d.next == "stop" and "target met" in d.stop_reason
    d = j.decide(judge_input(correct=False, iters_without_progress=3))
    assert d.next == "stop" and "no progress for 3" in d.stop_reason
    inp = timed(judge_input(gpu=GPU, best_speedup=1.0, target_speedup=2.0, stress_passed=True), 1.0)
    inp.check.integrity = inp.check.integrity or __import__("kiln.tools.records", fromlist=["x"]).IntegrityRecord()
    inp.check.integrity.physics = PhysicsRecord(floor_us=9.3, measured_us=10.0, pct_of_floor=93.0)
    d = j.decide(inp)
    assert d.next == "stop" and "93% of the roofline" in d.stop_reason
    d = j.decide(judge_input(stress_passed=True))  # CPU: correct + stress passed is the goal
    assert d.next == "stop" and "not measured" in d.stop_reason
    assert model.calls == []


def test_transport_failure_becomes_a_rules_decision():
    j, _ = judge({"raise": "server_error"}, {"raise": "server_error"}, {"raise": "server_error"},
                 {"raise": "server_error"})
    d = j.decide(judge_input(correct=False))
    assert d.next == "repair" and "HTTP 500" in d.error and "expected 0.1, got 0.3" in d.diagnosis


def test_scripted_timeouts_are_retried():
    j, model = judge({"raise": "timeout"}, verdict("repair", "correction"))
    assert j.decide(judge_input(correct=False)).next == "repair" and model.remaining == 0
