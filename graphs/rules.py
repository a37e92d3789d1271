"""Hard rules, enforced in code over the Judge, and the budget test the conditional edges use.

- never stop as "solved" while the best kernel fails a check;
- stop when the best is correct, its stress tests pass, and either the target is met (the speedup's
  CI low end reaches it, or speed cannot be measured: CPU) or it is at >= 90% of its roofline
  (both rules: kiln.agents.stoprules);
- go and stress the kernel first when that is all that is missing;
- stop when a budget is spent, or after K Coder rounds without progress.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from kiln.agents import stoprules
from kiln.graphs.context import RunOptions
from kiln.graphs.state import Candidate, RunState, RunStatus
from kiln.graphs.suite import active_names, is_current
from kiln.tools.profile.floors import DIFFER_X
from kiln.tools.records import JSON_SAFE


class Verdict(BaseModel):
    model_config = JSON_SAFE

    goto: Literal["finish", "propose"]
    status: RunStatus = "running"
    reason: str


def best(state: RunState) -> Candidate | None:
    bid = state.get("best_id")
    return state.get("candidates", {}).get(bid) if bid else None


def valid_case_names(state: RunState) -> list[str]:
    """The stress cases in the suite now (valid, not retired)."""
    return sorted(active_names(state))


def stress_ok(state: RunState, cand: Candidate) -> bool:
    """At least one propose round ran, and the candidate passed every case of today's suite."""
    if state.get("stress_rounds", 0) < 1 or not cand.correct or cand.failed_cases:
        return False
    return is_current(cand, active_names(state))


def speedup_for_target(cand: Candidate, opts: RunOptions) -> tuple[float | None, float | None]:
    """(median, CI low) of the speedup against the target's baseline."""
    if opts.target_baseline == "compile":
        return cand.speedup_vs_compile, cand.speedup_compile_ci_low
    return cand.speedup_vs_eager, cand.speedup_eager_ci_low


def target_met(cand: Candidate, opts: RunOptions) -> tuple[bool, str]:
    """The target rule (kiln.agents.stoprules: the CI's low end must reach it), with its reason."""
    measured = cand.speedup_vs_eager is not None
    value, low = speedup_for_target(cand, opts)
    if not stoprules.target_met(value, low, opts.target_speedup, measured=measured):
        return False, ""
    if not measured or value is None:
        return True, "correct; speed not measured on this device"
    low = low if low is not None else value
    return True, f"target met: {value:.2f}x vs {opts.target_baseline} (CI low {low:.2f}x)"


def at_roofline(cand: Candidate, opts: RunOptions) -> tuple[bool, str]:
    """The roofline rule (kiln.agents.stoprules), with its reason: not when the reference's FLOPs set
    the floor far above the I/O floor (a simplification doing less work may beat it; the Judge,
    told both, decides)."""
    pct = cand.pct_of_roofline
    if stoprules.at_roofline(pct, floors_differ=(cand.floors_ratio or 0.0) >= DIFFER_X,
                             stop_pct=opts.roofline_stop_pct):
        return True, f"at {pct:.0f}% of its roofline"
    return False, ""


def stress_pass_words(state: RunState) -> str:
    """'stress tests pass', naming the cases retired unverified: never said plainly while one is."""
    retired = sorted(state.get("retired", {}))
    if not retired:
        return "stress tests pass"
    return f"stress tests pass, except {len(retired)} retired unverified (too slow to check): {', '.join(retired)}"


def hard_rules(state: RunState, opts: RunOptions) -> Verdict | None:
    cand = best(state)
    if cand is not None and cand.correct:
        met, why = target_met(cand, opts)
        roof, why_roof = at_roofline(cand, opts)
        if met or roof:
            reason = why if met else why_roof
            if stress_ok(state, cand):
                return Verdict(goto="finish", status="solved", reason=f"{reason}; {stress_pass_words(state)}")
            return Verdict(goto="propose", reason=f"{reason}; stress tests pending")
    k = opts.budgets.no_progress_iters
    if state.get("no_progress", 0) >= k:
        return Verdict(goto="finish", status="no_progress", reason=f"no better kernel in {k} rounds")
    return None


def tokens_used(state: RunState) -> int:
    return sum(u.input_tokens + u.output_tokens for u in state.get("usage", []))


def cost_usd(state: RunState) -> float | None:
    costs = [u.cost_usd for u in state.get("usage", []) if u.cost_usd is not None]
    return sum(costs) if costs else None


def budget_spent(state: RunState, opts: RunOptions) -> str | None:
    """The first budget reached, in plain words, or None."""
    b = opts.budgets
    if b.tokens is not None and tokens_used(state) >= b.tokens:
        return f"token budget spent ({tokens_used(state)} >= {b.tokens})"
    cost = cost_usd(state)
    if b.usd is not None and cost is not None and cost >= b.usd:
        return f"cost budget spent (${cost:.4f} >= ${b.usd:.4f})"
    if b.minutes is not None and state.get("elapsed_s", 0.0) >= b.minutes * 60:
        return f"time budget spent ({state.get('elapsed_s', 0.0) / 60:.1f} >= {b.minutes} min)"
    return None


def iterations_spent(state: RunState, opts: RunOptions) -> str | None:
    n = state.get("iteration", 0)
    return f"iteration budget spent ({n} Coder rounds)" if n >= opts.budgets.max_iters else None
