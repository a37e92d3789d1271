"""Budgets and the usage tracker under the name some callers import (`kiln.agents.llm.budget`)."""

from kiln.agents.llm.usage import Budgets, UsageSummary, UsageTracker

__all__ = ["Budgets", "UsageSummary", "UsageTracker"]
