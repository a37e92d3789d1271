"""Before any LLM call: refuse a problem no run could use, in one line (`KilnInputError`, exit 2).

- a problem file over `MAX_PROBLEM_BYTES`: every request of every role opens with the whole problem,
  so a 100 MB file would become a 100 MB prompt (issue 25 item 15);
- a reference with no finite output on its own inputs: no kernel can be checked against NaN, and a
  loop would spend every round on it (item 14). The reference runs once, sandboxed, as a stress
  case's does (`kiln.agents.casecheck.run_case`); the same run gives the problem's input size.
"""

from __future__ import annotations

from pathlib import Path

from kiln.graphs.context import RunOptions
from kiln.tools.errors import KilnInputError

MAX_PROBLEM_BYTES = 64 * 1024
"""A KernelBench problem is a few KB (the largest level-3 file is under 10 KB)."""


def check_problem_file(problem: Path) -> None:
    size = Path(problem).stat().st_size
    if size > MAX_PROBLEM_BYTES:
        raise KilnInputError(f"{problem}: the problem file is {size:,} bytes, over kiln's limit of "
                             f"{MAX_PROBLEM_BYTES:,} bytes (every LLM request carries the whole problem)")


def check_reference(problem: Path, opts: RunOptions) -> int | None:
    """Run the reference once; raise when its output has no finite element. Returns the problem's
    input size (elements), or None when the run did not finish (the checks will say why)."""
    from kiln.agents.casecheck import run_case

    ran = run_case(Path(problem).read_text(), device=opts.device, timeout_s=opts.case_timeout_s,
                   isolation=opts.check.isolation, bwrap=opts.check.bwrap)
    if ran.nonfinite:
        raise KilnInputError(f"{problem}: the reference gives nothing to check on its own inputs: {ran.nonfinite}; "
                             "fix the problem (a NaN reference matches no kernel)")
    return ran.input_numel
