"""A live view of a run: iteration, stage, best speedup so far, tokens and cost, fed by the
graph's `updates` and `custom` stream parts. On a terminal: two lines redrawn in place (where the
run is; what it has), neither wrapping inside a field at 80 columns; anywhere else, one plain line
per finished node, every figure labelled."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text


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
            before = (self.stage, self.detail)
            self._custom(part["data"])
            if self._plain and (self.stage, self.detail) != before and self.detail:  # a check starts: say so
                self.console.print(f"kiln run · iteration {self.iteration} · {self.stage} {self.detail} ...",
                                   highlight=False, markup=False, soft_wrap=True)
        elif part["type"] == "updates":
            for node, update in (part["data"] or {}).items():
                if isinstance(update, dict) and not node.startswith("__"):  # LangGraph's own keys
                    self._update(node, update)
                    if self._plain:
                        self.console.print(self.line(), highlight=False, markup=False, soft_wrap=True)
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

    def _best_text(self) -> str:
        if not self.best:
            return "best: none yet"
        speed = f"{self.best_speedup:.2f}x vs eager" if self.best_speedup is not None else "speed not measured"
        return f"best {self.best} ({'correct' if self.best_correct else 'failing'}, {speed})"

    def line(self) -> str:
        return (f"kiln run · iteration {self.iteration} · {self.stage} · {self._best_text()} · "
                f"tokens {self.tokens} · cost ${self.cost:.4f}")

    def render(self) -> Group:
        where = f"kiln run · iteration {self.iteration} · {self.stage} {self.detail}".strip()
        what = f"{self._best_text()} · tokens {self.tokens} · cost ${self.cost:.4f}"
        return Group(*(Text(t, no_wrap=True, overflow="ellipsis") for t in (where, what)))
