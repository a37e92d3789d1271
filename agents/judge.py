"""The LLM Judge: a typed `JudgeDecision` through structured output, bounded by hard rules.

Some decisions need no model (no progress for K iterations; the target met with stress tests
passed; the kernel at >= 90% of its roofline). The model's own decision is then checked against
the rules: it may never stop as "solved", optimize or stress-test a kernel that fails a check,
and may stop only for one of the allowed reasons. Every override is recorded in `overridden`.
"""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import BaseMessage, SystemMessage
from pydantic import BaseModel, Field

from kiln.agents import prompts, stoprules
from kiln.agents.base import JudgeDecision, JudgeInput, JudgeMode, NextStep
from kiln.agents.checkcost import CheckCost, check_cost
from kiln.agents.llm.client import LLMClient, clip, user_message
from kiln.agents.llm.transport import BudgetExhausted, LLMCallError
from kiln.tools.profile.floors import Floors, floor_lines, floors
from kiln.tools.profile.render import render_digest
from kiln.tools.records import CheckRecord

PLAN_MAX_CHARS = 1200
MAX_SOURCE_CHARS = 24000


class JudgeVerdict(BaseModel):
    """The Judge's decision about one kernel (the schema the model fills in)."""

    mode: Literal["correction", "too_slow", "optimization"] = Field(
        description="correction if any check failed with a wrong result or an error; too_slow if every call that "
                    "ran passed but the check's time ran out; optimization if it passed every check")
    diagnosis: str = Field(description="what is wrong or what limits speed, one or two sentences")
    bottleneck: str | None = Field(description="optimization mode: exactly one bottleneck; else null")
    evidence: list[str] = Field(description="numbers from the evaluation or profile that support it")
    plan: str = Field(description="one fix or one optimization, a few sentences at most")
    next: Literal["repair", "optimize", "stress", "stop"] = Field(description="the next step")
    stop_reason: str | None = Field(description="why stop, when next is 'stop'; else null")


def speed_measured(inp: JudgeInput) -> bool:
    return inp.check.timing is not None and inp.check.timing.measured


def target_met(inp: JudgeInput) -> bool:
    """The target rule (kiln.agents.stoprules) on the best kernel: its CI's low end must reach the
    target. Without a GPU speed is not measured, so correctness is the goal."""
    measured = inp.gpu.device != "cpu" or speed_measured(inp)
    return stoprules.target_met(inp.best_speedup, inp.best_speedup_ci_low, inp.target_speedup, measured=measured)


def physics_floors(check: CheckRecord) -> Floors | None:
    """The check's I/O floor and its algorithm floor (the reference's FLOPs), apart (issue 25 item 11)."""
    p = check.integrity.physics if check.integrity else None
    if p is None:
        return None
    return floors(p.bytes_moved, p.flops, gbps=p.peak_gbps, tflops=p.peak_tflops)


def roofline_pct(inp: JudgeInput) -> float | None:
    physics = inp.check.integrity.physics if inp.check.integrity else None
    return physics.pct_of_floor if physics else None


def floors_differ(inp: JudgeInput) -> bool:
    """The reference's FLOPs set the floor far above the I/O floor: a simplification doing less work
    may beat it, so the rules do not stop at the roofline; the Judge, told both floors, decides (a
    stop it then asks for at the roofline is allowed)."""
    f = physics_floors(inp.check)
    return f is not None and f.differ


def cost_of(inp: JudgeInput) -> CheckCost:
    return inp.cost or check_cost(inp.check)


def _mode(inp: JudgeInput) -> JudgeMode:
    if inp.check.correct:
        return "optimization"
    return "too_slow" if cost_of(inp).too_slow else "correction"


def _rule(inp: JudgeInput, next_: NextStep, diagnosis: str, stop_reason: str | None = None, **kw) -> JudgeDecision:
    return JudgeDecision(mode=_mode(inp), diagnosis=diagnosis, next=next_, stop_reason=stop_reason, **kw)


def rule_decision(inp: JudgeInput, no_progress_k: int) -> JudgeDecision | None:
    """A decision the rules make without the model, or None."""
    if inp.iters_without_progress >= no_progress_k:
        why = f"no progress for {inp.iters_without_progress} iterations"
        return _rule(inp, "stop", why, why)
    if not inp.check.correct or not inp.stress_passed:
        return None
    retired = f" (retired unverified, too slow to check: {', '.join(inp.retired_cases)})" if inp.retired_cases else ""
    if target_met(inp):
        why = f"speed target met and stress tests pass{retired}" if speed_measured(inp) else \
            f"correct and stress tests pass{retired}; speed not measured without a GPU"
        return _rule(inp, "stop", why, why)
    pct = roofline_pct(inp)
    if stoprules.at_roofline(pct, floors_differ=floors_differ(inp)):
        why = f"at {pct:.0f}% of the roofline floor"
        return _rule(inp, "stop", why, why)
    return None


def enforce_rules(d: JudgeDecision, inp: JudgeInput) -> JudgeDecision:
    """Bound the model's decision by the hard rules; record what was changed and why."""
    correct, mode = inp.check.correct, _mode(inp)
    want: NextStep = d.next
    why = None
    if not correct and d.next in ("optimize", "stress", "stop"):
        want, why = "repair", f"'{d.next}' refused: the kernel fails a check"
    elif correct and d.next == "stop" and not inp.stress_passed:
        want, why = "stress", "'stop' refused: the stress tests have not passed yet"
    elif correct and d.next == "stop" and not target_met(inp) and not stoprules.at_roofline(roofline_pct(inp)):
        want, why = "optimize", "'stop' refused: target not met and below 90% of roofline"
    update: dict = {"mode": mode, "next": want}
    if why:
        update.update(overridden=why, stop_reason=None)
    elif want == "stop" and not d.stop_reason:
        update["stop_reason"] = d.diagnosis
    if want != "stop":
        update["stop_reason"] = None
    return d.model_copy(update=update)


def failed_decision(inp: JudgeInput, error: str) -> JudgeDecision:
    """When the Judge's call or reply failed: continue on the verifier's own feedback, or stop a passing kernel."""
    if not inp.check.correct:
        first = inp.check.correctness.first_failure if inp.check.correctness else None
        diagnosis = first or "; ".join(inp.check.reasons) or f"status {inp.check.status}"
        return _rule(inp, "repair", diagnosis, error=error)
    next_: NextStep = "stop" if inp.stress_passed else "stress"
    return _rule(inp, next_, "the Judge failed", f"judge failed: {error}" if next_ == "stop" else None, error=error)


class LLMJudge:
    """Implements `kiln.agents.base.Judge` on top of one chat model."""

    def __init__(self, client: LLMClient, *, no_progress_k: int = 3) -> None:
        self.client = client
        self.no_progress_k = no_progress_k

    def messages(self, inp: JudgeInput) -> list[BaseMessage]:
        system = prompts.render("judge_system.j2", gpu=inp.gpu, no_progress_k=self.no_progress_k)
        user = prompts.render(
            "judge_user.j2",
            iteration=inp.iteration, problem_name=inp.problem_name, problem_src=inp.problem_src,
            candidate_src=clip(inp.candidate_src, MAX_SOURCE_CHARS),
            check_summary=prompts.render("check_summary.j2", check=inp.check, cost=cost_of(inp),
                                         floor_lines=floor_lines(f) if (f := physics_floors(inp.check)) else []),
            profile_digest=render_digest(inp.profile) if inp.profile else None, best_speedup=inp.best_speedup,
            best_speedup_ci_low=inp.best_speedup_ci_low,
            target_speedup=inp.target_speedup, iters_without_progress=inp.iters_without_progress,
            no_progress_k=self.no_progress_k, stress_cases=inp.stress_cases,
            stress_passed=inp.stress_passed, on_gpu=inp.gpu.device == "cuda", failing_case=inp.failing_case,
            last_override=inp.last_override, retired_cases=inp.retired_cases,
        )
        problem = prompts.problem_block(inp.problem_name, inp.problem_src)
        return [SystemMessage(system), user_message(problem, user)]

    def decide(self, inp: JudgeInput) -> JudgeDecision:
        ruled = rule_decision(inp, self.no_progress_k)
        if ruled is not None:
            return ruled
        try:
            reply = self.client.structured(self.messages(inp), JudgeVerdict)
        except BudgetExhausted as exc:
            return _rule(inp, "stop", f"budget spent: {exc}", str(exc), failure="budget")
        except LLMCallError as exc:
            return failed_decision(inp, str(exc)).model_copy(update={"failure": "call"})
        if reply.parsed is None and reply.budget_stop:
            return _rule(inp, "stop", f"budget spent: {reply.budget_stop}", reply.budget_stop, failure="budget",
                         usage=reply.usage)
        if reply.parsed is None:
            return failed_decision(inp, f"unusable judge reply: {reply.error}").model_copy(
                update={"usage": reply.usage, "failure": "reply"})
        verdict: JudgeVerdict = reply.parsed
        fields = verdict.model_dump()
        fields["plan"] = fields["plan"][:PLAN_MAX_CHARS]
        decision = JudgeDecision(**fields, usage=reply.usage)
        return enforce_rules(decision, inp)
