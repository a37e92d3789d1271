"""`kiln eval`'s progress on stderr: a live bar on a terminal, one plain line per finished sample
anywhere else (a pipe, a CI log, `nohup`), every figure with its label. On a terminal the bar and
the figures are two lines, so at 80 columns neither wraps inside a field."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Column
from rich.text import Text

from kiln.evals.batch.metrics import SampleOutcome, fast_p

if TYPE_CHECKING:
    from kiln.evals.batch.run import Batch

FIELDS = "correct {correct} · fast_1 {fast1} · tokens {tokens} · cost ${cost}"


def fields(outcomes: list[SampleOutcome], timed: bool) -> dict[str, Any]:
    """The running figures: problems with a correct sample, fast_1 (— off a GPU), tokens, cost."""
    from kiln.evals.batch.run import group

    problems = group(outcomes)
    correct = sum(1 for p in problems if p.n_correct)
    f1 = f"{fast_p(problems, 'eager', 1.0):.2f}" if problems and timed else "—"
    cost = sum(o.cost_usd or 0.0 for o in outcomes)
    return {"correct": f"{correct}/{len(problems)}", "fast1": f1,
            "tokens": str(sum(o.tokens for o in outcomes)), "cost": f"{cost:.2f}"}


def sample_line(done: int, total: int, outcome: SampleOutcome | None, figures: dict[str, str],
                elapsed_s: float) -> str:
    """One finished sample, for logs: `kiln eval 2/4 · level1/19_ReLU: ok · correct 2/2 · ...`."""
    what = ""
    if outcome is not None:
        what = f" · {outcome.problem}" + (f" #{outcome.sample}" if outcome.sample else "") + f": {outcome.status}"
    return f"kiln eval {done}/{total}{what} · {FIELDS.format(**figures)} · {elapsed_s:.0f} s"


class TwoLineProgress(Progress):
    """Line 1: label, bar, done/total, elapsed; line 2: the labelled figures."""

    def get_renderables(self) -> Any:
        yield self.make_tasks_table(self.tasks)
        for task in self.tasks:
            yield Text(FIELDS.format(**task.fields), no_wrap=True, overflow="ellipsis")


def live_bar(console: Console) -> Progress:
    """The terminal's bar: its fixed columns never wrap; the bar takes what is left (at least 10)."""
    fixed: dict[str, Any] = {"no_wrap": True}
    columns = [TextColumn("[bold]kiln eval", table_column=Column(**fixed)),
               BarColumn(bar_width=None, table_column=Column(ratio=1, min_width=10)),
               MofNCompleteColumn(table_column=Column(**fixed)), TimeElapsedColumn(table_column=Column(**fixed))]
    return TwoLineProgress(*columns, console=console, transient=False, expand=True)


class Reporter:
    """Folds finished samples into the figures; draws the bar or prints a line for each."""

    def __init__(self, batch: Batch, timed: bool, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.timed, self.started = timed, time.monotonic()
        self.seen: list[SampleOutcome] = list(batch.store.outcomes())
        self.total = len(batch.problems) * batch.cfg.samples
        self.bar = live_bar(self.console) if self.console.is_terminal else None
        self.task: Any = None

    def __enter__(self) -> Reporter:
        if self.bar is not None:
            self.bar.__enter__()
            self.task = self.bar.add_task("eval", total=self.total, completed=len(self.seen),
                                          **fields(self.seen, self.timed))
        else:
            left = self.total - len(self.seen)
            self.plain(f"kiln eval: {left} of {self.total} samples to run ({len(self.seen)} already done)")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def plain(self, text: str) -> None:
        (self.bar.console if self.bar is not None else self.console).print(text, highlight=False, markup=False,
                                                                          soft_wrap=True)

    def __call__(self, outcome: SampleOutcome | None, error: str | None) -> None:
        if outcome is not None:
            self.seen.append(outcome)
        if error:
            self.plain(f"job failed: {error}")
        figures = fields(self.seen, self.timed)
        if self.bar is not None:
            self.bar.update(self.task, completed=len(self.seen), **figures)
        else:
            self.plain(sample_line(len(self.seen), self.total, outcome, figures, time.monotonic() - self.started))


def run_with_progress(batch: Batch, timed: bool, console: Console | None = None) -> None:
    with Reporter(batch, timed, console) as report:
        batch.run(report)
        if batch.stopped:
            report.plain(f"stopped: {batch.stopped} after {time.monotonic() - report.started:.0f} s")
