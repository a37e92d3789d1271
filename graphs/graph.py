"""The kiln agent loop as a LangGraph state machine. Reads like a table of contents:

    START -> code -> evaluate -> profile -> judge --Command--> code | propose | finish
                       |  budget spent -> finish      propose -> judge (budget spent -> finish)
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from kiln.graphs.code import code
from kiln.graphs.context import RunContext, RunOptions
from kiln.graphs.evaluate import evaluate
from kiln.graphs.finish import finish
from kiln.graphs.judge import judge
from kiln.graphs.profile import profile
from kiln.graphs.propose import propose
from kiln.graphs.routers import after_code, after_evaluate, after_propose
from kiln.graphs.state import RunState


def recursion_limit(opts: RunOptions) -> int:
    """A backstop only: the loop's own counters stop it first. Each Coder round is at most five
    steps, and each round may add a propose/judge pair per stress round."""
    if opts.recursion_limit:
        return opts.recursion_limit
    return 20 + 12 * opts.budgets.max_iters


def build_graph() -> StateGraph:
    g = StateGraph(RunState, context_schema=RunContext)
    g.add_node("code", code)
    g.add_node("evaluate", evaluate)
    g.add_node("profile", profile)
    g.add_node("judge", judge, destinations=("code", "propose", "finish"))
    g.add_node("propose", propose)
    g.add_node("finish", finish)
    g.add_edge(START, "code")
    g.add_conditional_edges("code", after_code)
    g.add_conditional_edges("evaluate", after_evaluate)
    g.add_edge("profile", "judge")
    g.add_conditional_edges("propose", after_propose)
    g.add_edge("finish", END)
    return g
