"""The evaluator seam: anything that turns (problem, candidate) into a CheckRecord.

The local implementation (`kiln.tools.check.LocalEvaluator`) runs each candidate in its own
subprocess. Batch runs (`kiln.evals`) add a pool or Ray behind the same interface; the agent graph
only ever sees this Protocol, through its runtime context.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from kiln.tools.records import CheckOptions, CheckRecord


@runtime_checkable
class Evaluator(Protocol):
    def check(self, problem: Path, candidate: Path, options: CheckOptions) -> CheckRecord:
        """Compile, verify, (on a GPU) time, and integrity-check one candidate. Never raises for a
        broken candidate: failures are records. Raises KilnInputError only for a broken problem."""
        ...
