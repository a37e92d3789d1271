"""One source for every cost figure a role is shown (issue 25 items 1, 2 and 4), on the record of
the real run's GEMM kernel (run3/12, req-6): 48 of its 52 planned calls done, every one passed, then
the 90 s correctness stage ran out. Before: the Judge read "48/48 trials passed" and a failure, the
Coder's repair prompt "24 of 24 trials passed, 3.61 s per call" (a trial's two calls summed), the
Proposer "70 candidate calls" per case, and the Coder's system prompt "only correctness counts"."""

from __future__ import annotations

from kiln.agents.base import GpuFacts, JudgeDecision
from kiln.agents.checkcost import CheckBudget, check_cost, planned_calls_per_case
from kiln.agents.coder import LLMCoder
from kiln.agents.judge import LLMJudge, enforce_rules
from kiln.tools.records import CaseSummary, CheckRecord, CorrectnessRecord, TrialRecord

from .helpers import coder_task, judge_input

REASON = ("timed out in stage correctness (problem/x0.01/trial 4): the stage exceeded its 90 s budget; the "
          "candidate's last calls took problem/x3/3: 1.47 s")


def gemm_record() -> CheckRecord:
    """24 trials (48 calls) at 1.5 s a call, then the stage's 90 s ran out; 26 trials were planned."""
    rows = [TrialRecord(case="problem", distribution="x1", trial=i // 2, passed=True, candidate_s=1.5,
                        phase="first_call" if i % 2 == 0 else "second_call") for i in range(48)]
    summary = {"problem": CaseSummary(n_trials=24, n_passed=24, candidate_s=72.0, reference_s=5.76, timed_out=True)}
    return CheckRecord(problem="12_Gemm.py", candidate="c0001.py", status="timeout", reasons=[REASON],
                       correctness=CorrectnessRecord(atol=1e-4, rtol=1e-4, n_trials=48, n_passed=48, trials=rows,
                                                     n_planned=52, cases=summary, first_failure=REASON + "."),
                       stages_s={"correctness": 90.3})


def test_the_trial_plan_gives_the_calls_a_check_records():
    assert planned_calls_per_case(5) == 52  # what the real check planned (the Proposer was told 70)
    cost = check_cost(gemm_record(), budget_s=90.0)
    problem = cost.case("problem")
    assert (cost.calls, cost.calls_passed, cost.calls_planned) == (48, 48, 52)
    assert problem.s_per_call == 1.5 and problem.calls_planned == 52  # not 72 s / 24 trials = 3.0
    assert abs(problem.reference_s_per_trial - 0.24) < 1e-9
    assert cost.too_slow and cost.more_needed_s == 6.0  # 4 calls left at 1.5 s


def test_the_judge_reads_done_of_planned_all_passed_and_the_time_still_needed():
    inp = judge_input(correct=False).model_copy(update={"check": gemm_record(),
                                                        "cost": check_cost(gemm_record(), budget_s=90.0)})
    user = LLMJudge(None).messages(inp)[1].content
    assert "48 of 52 planned candidate calls done, all passed; then the check's time ran out" in user
    assert "about 6 s more were needed at 1.50 s per call" in user and "No wrong result" in user
    assert "48/48 trials" not in user and "first failure" not in user
    system = LLMJudge(None).messages(inp)[0].content
    assert '"too_slow"' in system
    # the mode is the rules', whatever the model says: no bug, too slow
    said = JudgeDecision(mode="correction", diagnosis="no bug", plan="fewer programs", next="repair")
    assert enforce_rules(said, inp).mode == "too_slow"
    wrong = judge_input(correct=False)
    assert enforce_rules(said, wrong).mode == "correction"


def test_the_coder_hears_the_budget_and_the_measured_cost_per_call():
    budget = CheckBudget(device="cpu", correctness_s=90.0, calls_per_case=52, cases=1)
    task = coder_task("repair", last_src="LAST", gpu=GpuFacts(), budget=budget,
                      cost=check_cost(gemm_record(), budget_s=90.0))
    system, user = (m.content for m in LLMCoder(None).messages(task))
    assert "only correctness counts" not in system
    assert "one stage of 90 s, shared by the problem" in system and "plans 52 calls of your kernel per case" in system
    assert "one call should take under about 1.4 s" in system  # 0.8 x 90 s / 52 calls
    assert "Never branch on the device" in system
    assert "problem: 48 of 52 calls done, 48 passed, 1.50 s per candidate call" in user
    assert "3.61 s" not in user and "24 of 24" not in user
    assert "too slow for the check's" in user and "Fix exactly the problem" not in user
