"""Token usage per role and per call, prices for known models, and the run's budgets.

`UsageTracker` is the one object the graph asks "may I go on?" (`exhausted()`); the LLM client
also asks it before every call, so a spent budget never buys another request.
"""

from __future__ import annotations

import json
import re
import threading
import time
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, Field

from kiln.agents.base import Usage
from kiln.tools.errors import KilnConfigError
from kiln.tools.records import JSON_SAFE

_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


@lru_cache(maxsize=1)
def price_table() -> dict[str, tuple[float, float]]:
    """Model name -> (USD per 1M input tokens, USD per 1M output tokens), from prices.json."""
    data = json.loads((Path(__file__).parent / "prices.json").read_text())
    return {name: (float(p[0]), float(p[1])) for name, p in data["models"].items()}


def known_price(model: str) -> tuple[float, float] | None:
    """The price of `model` or of the base name of a dated snapshot; None when unknown."""
    table = price_table()
    name = model.split("/")[-1]
    if name in table:
        return table[name]
    base = _SNAPSHOT.sub("", name)
    return table.get(base)


def cost_usd(model: str, input_tokens: int, output_tokens: int) -> float | None:
    price = known_price(model)
    if price is None:
        return None
    return (input_tokens * price[0] + output_tokens * price[1]) / 1e6


class Budgets(BaseModel):
    """The limits of one run (`kiln run`, and each sample of `kiln eval`); None means unlimited.
    Reaching any one stops the run cleanly. The LLM tracker enforces usd / tokens / minutes before
    every call; the graph enforces all five on its own edges."""

    model_config = JSON_SAFE

    max_iters: int = Field(8, ge=1, description="--max-iters: Coder rounds")
    usd: float | None = Field(None, gt=0, description="--budget-usd")
    tokens: int | None = Field(None, gt=0, description="--budget-tokens (input + output)")
    minutes: float | None = Field(None, gt=0, description="--budget-minutes, wall clock of the run")
    no_progress_iters: int = Field(4, ge=1, description="--no-progress: stop after K rounds without a better best")


class RoleTotals(BaseModel):
    model_config = JSON_SAFE

    calls: int = 0
    cached_calls: int = 0
    failed_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = Field(None, description="all calls at list price, cache hits included (what budgets count)")
    spent_usd: float | None = Field(None, description="cache hits excluded: what was actually paid")


class UsageSummary(BaseModel):
    """What summary.json reports about LLM use; also what a resumed run restores from."""

    model_config = JSON_SAFE

    calls: list[Usage] = Field(default_factory=list)
    by_role: dict[str, RoleTotals] = Field(default_factory=dict)
    total: RoleTotals = Field(default_factory=RoleTotals)
    elapsed_s: float = 0.0
    unpriced_models: list[str] = Field(default_factory=list, description="models counted in tokens only")


def add_usage(tot: RoleTotals, u: Usage) -> None:
    """Count one call into a total."""
    tot.calls += 1
    tot.cached_calls += int(u.cached)
    tot.input_tokens += u.input_tokens
    tot.output_tokens += u.output_tokens
    if u.cost_usd is not None:
        tot.cost_usd = (tot.cost_usd or 0.0) + u.cost_usd
        if not u.cached:
            tot.spent_usd = (tot.spent_usd or 0.0) + u.cost_usd


class UsageTracker:
    """Thread-safe ledger of LLM calls, checked against `Budgets`.

    A cache hit counts its original tokens and list price against the budgets, so a rerun from the
    cache stops exactly where the original run stopped; `spent_usd` leaves cache hits out.
    """

    def __init__(self, budgets: Budgets | None = None, *, clock=time.monotonic) -> None:
        self.budgets = budgets or Budgets()
        self._clock = clock
        self._start = clock()
        self._offset_s = 0.0
        self._lock = threading.Lock()
        self._calls: list[Usage] = []
        self._failed: dict[str, int] = {}

    def record(self, usage: Usage) -> None:
        with self._lock:
            self._calls.append(usage)

    def record_failure(self, role: str) -> None:
        with self._lock:
            self._failed[role] = self._failed.get(role, 0) + 1

    def elapsed_s(self) -> float:
        return self._offset_s + (self._clock() - self._start)

    def seconds_left(self) -> float | None:
        """What the minutes budget leaves (None without one): the bound on any request's timeout."""
        if self.budgets.minutes is None:
            return None
        return self.budgets.minutes * 60 - self.elapsed_s()

    def restore(self, summary: UsageSummary) -> None:
        """Continue a resumed run: earlier calls and elapsed time count against the budgets."""
        with self._lock:
            self._calls = list(summary.calls) + self._calls
            self._offset_s += summary.elapsed_s
            for role, tot in summary.by_role.items():
                self._failed[role] = self._failed.get(role, 0) + tot.failed_calls

    def summary(self) -> UsageSummary:
        with self._lock:
            calls, failed = list(self._calls), dict(self._failed)
        out = UsageSummary(calls=calls, elapsed_s=round(self.elapsed_s(), 3))
        for u in calls:
            add_usage(out.by_role.setdefault(u.role, RoleTotals()), u)
            add_usage(out.total, u)
        for role, n in failed.items():
            out.by_role.setdefault(role, RoleTotals()).failed_calls += n
            out.total.failed_calls += n
        out.unpriced_models = sorted({u.model for u in calls if u.cost_usd is None and not u.cached})
        return out

    def exhausted(self) -> str | None:
        """The first budget that is spent, as a one-line reason; None while all remain."""
        b, tot = self.budgets, self.summary().total
        if b.usd is not None and (tot.cost_usd or 0.0) >= b.usd:
            return f"budget-usd spent: ${tot.cost_usd or 0.0:.4f} of ${b.usd:.4f}"
        used = tot.input_tokens + tot.output_tokens
        if b.tokens is not None and used >= b.tokens:
            return f"budget-tokens spent: {used} of {b.tokens} tokens"
        minutes = self.elapsed_s() / 60.0
        if b.minutes is not None and minutes >= b.minutes:
            return f"budget-minutes spent: {minutes:.2f} of {b.minutes:.2f} min"
        return None


def check_usd_budget_priceable(budgets: Budgets, models: list[str]) -> None:
    """A USD budget cannot be enforced for a model without a price: say so at start."""
    if budgets.usd is None:
        return
    unknown = sorted({m for m in models if known_price(m) is None})
    if unknown:
        raise KilnConfigError(
            f"--budget-usd cannot be enforced: no price known for {', '.join(unknown)}; "
            "use --budget-tokens or --budget-minutes instead"
        )
