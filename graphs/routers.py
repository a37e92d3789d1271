"""Conditional edges. Budgets are checked here, as plain edges; the Judge's routing is a Command."""

from __future__ import annotations

from typing import Literal

from langgraph.runtime import Runtime

from kiln.graphs.code import unsupported_reason
from kiln.graphs.context import RunContext
from kiln.graphs.rules import budget_spent
from kiln.graphs.state import RunState


def stopping(state: RunState) -> bool:
    """A node already decided the run ends (an LLM call failed for good, a role found its budget spent)."""
    return state.get("status") not in (None, "running")


def after_code(state: RunState, runtime: Runtime[RunContext]) -> Literal["evaluate", "finish"]:
    """Stop when the Coder declined every child as unsupported (never fake a kernel), or could not be reached."""
    if stopping(state):
        return "finish"
    cands, new = state.get("candidates", {}), state.get("pending", [])
    if new and all(cands[c].source_path is None for c in new) and unsupported_reason(cands, new):
        return "finish"
    return "evaluate"


def after_evaluate(state: RunState, runtime: Runtime[RunContext]) -> Literal["profile", "finish"]:
    return "finish" if budget_spent(state, runtime.context.options) else "profile"


def after_propose(state: RunState, runtime: Runtime[RunContext]) -> Literal["judge", "finish"]:
    return "finish" if stopping(state) or budget_spent(state, runtime.context.options) else "judge"
