"""How a check ends early: the candidate's `Failure` (a status and reasons, raised inside the session),
a broken problem (`KilnInputError`, the user's input), and the secret random choices of the parent."""

from __future__ import annotations

import random
from typing import Any

from kiln.tools.check.workers import WorkerGone
from kiln.tools.draws import derive_seed
from kiln.tools.errors import KilnInputError


class Failure(Exception):
    """The candidate's check ends here with `status` and `reasons` (raised inside the session)."""

    def __init__(self, status: str, reasons: list[str], stderr: str = "") -> None:
        super().__init__("; ".join(reasons))
        self.status, self.reasons, self.stderr = status, reasons, stderr


def reference_broken(problem: str, gone: WorkerGone, timeout_s: float) -> KilnInputError | Failure:
    """The reference worker could not answer. Only what the problem alone decides blames it (a
    `KilnInputError`: its own exit, a reply it broke). A time-out or a kill by a signal can be the
    candidate's doing, whose worker shares the machine (one that keeps every core busy while it
    waits for its next command starves the reference; one that fills memory gets it killed): they
    end the check as a record that says both."""
    res = gone.result
    if gone.timed_out:
        return Failure("timeout", [f"the check ran out of its --timeout ({timeout_s:.0f} s) while kiln waited for the "
                                   f"reference worker ({gone.during}): the problem is too slow for this --timeout, or "
                                   "the candidate's worker kept the machine too busy for the reference to finish"],
                       res.stderr_tail)
    if gone.why:  # kiln stopped it for what it did itself (a reply it broke, a bound on its output)
        return KilnInputError(f"{problem}: the reference worker {gone.why} during {gone.during}")
    if res.signal_name:
        return Failure("error", [f"the reference worker was killed by {res.signal_name} during {gone.during} while the "
                                 "candidate's worker ran beside it (out of memory?): kiln cannot tell which caused it"],
                       res.stderr_tail)
    last = (res.stderr_tail.strip().splitlines() or [gone.why or "no output"])[-1]
    how = f"killed by {res.signal_name}" if res.signal_name else f"exit code {res.returncode}"
    return KilnInputError(f"{problem}: the reference worker died ({how}) during {gone.during}: {last}")


def reference_error(problem: str, err: dict[str, Any]) -> KilnInputError:
    if err.get("kind") == "input":
        return KilnInputError(f"{problem}: {err.get('message')}")
    return KilnInputError(f"{problem}: the reference Model failed in {err.get('where')}: {err.get('message')}")


def secret_rng(secret: int) -> random.Random:
    return random.Random(derive_seed(secret, "recheck"))
