"""The compiled graph for LangGraph Studio (`langgraph.json` points here). Studio draws it and
shows its state; a run needs a `RunContext` (roles, evaluator), which `kiln run` builds."""

from __future__ import annotations

from kiln.graphs.graph import build_graph

graph = build_graph().compile()
