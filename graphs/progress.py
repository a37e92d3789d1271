"""A live view of a run: iteration, stage, best speedup so far, tokens and cost, fed by the
graph's `updates` and `custom` stream parts."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table


class Progress:
    """Folds stream parts into a few numbers; renders them as a one-row table."""

    def __init__(self, console: Console | None = None, live: bool = True) -> None:
        self.console = console or Console(stderr=True)
        self.iteration, self.stage, self.detail = 0, "start", ""
        self.best: str | None = None
        self.best_speedup: float | None = None
        self.best_correct = False
        self.candidates: dict[str, Any] = {}
        self.tokens, self.cost = 0, 0.0
        self._live = Live(self.render(), console=self.console, transient=False, auto_refresh=False) \
            if live and self.console.is_terminal else None
        self._plain = live and self._live is None  # not a terminal: one line per finished node

    def __enter__(self) -> Progress:
        if self._live:
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live:
            self._live.__exit__(*exc)

    def feed(self, part: dict) -> None:
        if part["type"] == "custom":
            self._custom(part["data"])
        elif part["type"] == "updates":
            for node, update in (part["data"] or {}).items():
                if isinstance(update, dict) and not node.startswith("__"):  # LangGraph's own keys
                    self._update(node, update)
                    if self._plain:
                        self.console.print(self.line(), highlight=False, markup=False)
        if self._live:
            self._live.update(self.render(), refresh=True)

    def _custom(self, data: Any) -> None:
        if not isinstance(data, dict):
            return
        self.stage = data.get("stage", self.stage)
        self.iteration = data.get("iteration", self.iteration)
        self.detail = " ".join(f"{k}={v}" for k, v in data.items() if k in ("mode", "candidate"))

    def _update(self, node: str, update: dict) -> None:
        self.stage = node
        self.iteration = update.get("iteration", self.iteration)
        for u in update.get("usage") or []:
            self.tokens += u.input_tokens + u.output_tokens
            self.cost += u.cost_usd or 0.0
        self.candidates.update(update.get("candidates") or {})
        self.best = update.get("best_id") or self.best
        if self.best in self.candidates:
            cand = self.candidates[self.best]
            self.best_speedup, self.best_correct = cand.speedup_vs_eager, cand.correct

    def line(self) -> str:
        speed = f"{self.best_speedup:.2f}x" if self.best_speedup is not None else "speed not measured"
        best = f"{self.best} ({'correct' if self.best_correct else 'failing'}, {speed})" if self.best else "none yet"
        return f"[iteration {self.iteration}] {self.stage}: best {best}; {self.tokens} tokens, ${self.cost:.4f}"

    def render(self) -> Table:
        t = Table(title="kiln run", expand=False)
        for col in ("iteration", "stage", "best", "speedup vs eager", "tokens", "cost"):
            t.add_column(col)
        speed = f"{self.best_speedup:.2f}x" if self.best_speedup is not None else "not measured"
        best = f"{self.best} ({'correct' if self.best_correct else 'failing'})" if self.best else "-"
        t.add_row(str(self.iteration), f"{self.stage} {self.detail}".strip(), best, speed, str(self.tokens),
                  f"${self.cost:.4f}")
        return t
