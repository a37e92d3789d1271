"""The whole command's time budget (`kiln model --budget-minutes N`).

One `Clock` per invocation: it ends at start + N minutes. The stages after optimisation (the
end-to-end check, the bundle, the report) get a reserve, so optimisation stops early enough for
them: jobs stop starting, each running job's loop gets the time left as its minutes budget, and every
check is cut to the time left (`DeadlineEvaluator`); a check that could not finish in time is not
started. Checks wait for a slot in order of their group's expected gain, so a run cut short has
spent its time on the most valuable groups.
"""

from __future__ import annotations

import heapq
import itertools
import math
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kiln.tools.records import CheckOptions, CheckRecord

MIN_CHECK_S = {"cuda": 8.0, "cpu": 12.0}
"""A check given less than this would only time out: it is not started."""
FIRST_CHECK_S = {"cuda": 30.0, "cpu": 40.0}
"""What a check is assumed to take before one has been timed."""


def process_age_s() -> float:
    """Seconds since this process started (Linux /proc; 0 elsewhere): the budget counts the
    interpreter's start and kiln's imports too, so the whole command ends in time."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        import os

        return max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


class Clock:
    """The deadline of one invocation, and the reserve its last stages need. `already_s`: time the
    command spent before the clock was made (its start: `process_age_s()`)."""

    def __init__(self, minutes: float | None, now: Callable[[], float] = time.monotonic,
                 already_s: float = 0.0) -> None:
        self.now = now
        self.start = now() - already_s
        self.minutes = minutes
        self.end = self.start + minutes * 60 if minutes else math.inf
        self.reserve_s = 0.0

    @property
    def bounded(self) -> bool:
        return self.end < math.inf

    def left_s(self, until: float | None = None) -> float:
        return (self.end if until is None else until) - self.now()

    def elapsed_s(self) -> float:
        return self.now() - self.start

    def tail_start(self) -> float:
        """When the end-to-end check must begin."""
        return self.end - self.reserve_s

    def reserve(self, seconds: float) -> None:
        """Keep `seconds` for the end-to-end check, the bundle and the report, at most half the budget
        (a run whose tail cannot fit still optimises for half its time, then does what fits)."""
        if self.bounded:
            self.reserve_s = min(seconds, 0.5 * (self.end - self.start))

    def fits(self, seconds: float, until: float | None = None) -> bool:
        return self.left_s(until) >= seconds


class _Gate:
    """At most `n` holders; waiters are admitted highest priority first (then first come)."""

    def __init__(self, n: int) -> None:
        self.free = max(1, n)
        self.cond = threading.Condition()
        self.heap: list[tuple[float, int]] = []
        self.seq = itertools.count()

    def acquire(self, priority: float) -> None:
        with self.cond:
            ticket = (-priority, next(self.seq))
            heapq.heappush(self.heap, ticket)
            while not (self.free > 0 and self.heap[0] == ticket):
                self.cond.wait()
            heapq.heappop(self.heap)
            self.free -= 1
            self.cond.notify_all()

    def release(self) -> None:
        with self.cond:
            self.free += 1
            self.cond.notify_all()


class DeadlineEvaluator:
    """An evaluator whose checks end by a deadline and take their slot in order of expected gain.

    `deadline()` is read at each check (it moves when the clock's reserve changes); a check with
    less than MIN_CHECK_S left is answered at once with a `timeout` record that says why."""

    def __init__(self, inner, clock: Clock, device: str, priority: dict[str, float] | None = None,  # noqa: ANN001
                 deadline: Callable[[], float] | None = None) -> None:
        self.inner = inner
        self.clock = clock
        self.device = "cuda" if device == "cuda" else "cpu"
        self.priority = dict(priority or {})
        self.deadline = deadline or clock.tail_start
        self.durations_s: list[float] = []
        self.gate = _Gate(getattr(inner, "n_slots", 1))
        self.on_gpu = getattr(inner, "on_gpu", False)

    def __getattr__(self, name: str):  # noqa: ANN204 - warm(), profile_lock, ... of the inner evaluator
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def check_s(self) -> float:
        """What one check takes here: the slowest of the last few, or a first guess."""
        recent = self.durations_s[-5:]
        return max(recent) if recent else FIRST_CHECK_S[self.device]

    def _priority(self, problem: Path) -> float:
        return self.priority.get(str(Path(problem).resolve()), 0.0)

    def check(self, problem: Path, candidate: Path, options: CheckOptions, *,
              until: float | None = None) -> CheckRecord:
        self.gate.acquire(self._priority(problem))
        try:
            left = self.clock.left_s(until if until is not None else self.deadline())
            if left < max(MIN_CHECK_S[self.device], 0.75 * self.check_s()):
                return refused(problem, candidate, options, left)
            opts = options.model_copy(update={"timeout_s": min(options.timeout_s, left)})
            t0 = time.monotonic()
            rec = self.inner.check(problem, candidate, opts)
            if rec.status != "timeout":
                self.durations_s.append(time.monotonic() - t0)
            elif opts.timeout_s < options.timeout_s:  # its timeout was the budget's, not the user's
                rec.reasons.append(f"timed out at {opts.timeout_s:.0f} s: the time budget's cut (--timeout "
                                   f"{options.timeout_s:g}; --resume runs it again)")
            return rec
        finally:
            self.gate.release()


def refused(problem: Path, candidate: Path, options: CheckOptions, left_s: float) -> CheckRecord:
    why = (f"not run: the model run's time budget leaves {max(left_s, 0.0):.0f} s, less than a check needs "
           "(--budget-minutes; --resume continues)")
    return CheckRecord(problem=str(problem), candidate=str(candidate), device=options.device
                       if options.device != "auto" else "cpu", dtype=options.dtype, status="timeout", reasons=[why])


def median_or(values: list[float], default: float) -> float:
    return statistics.median(values) if values else default
