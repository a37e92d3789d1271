"""Subprocess worker for the corpus tests: build a candidate and call forward once.

Usage: python run_forward.py PROBLEM.py CANDIDATE.py DONE_FILE [DEVICE]
Writes DONE_FILE.calling just before forward (a heartbeat: a hang is timed from there) and
"returned" to DONE_FILE only if forward returned. The test reads the exit status, the signal, a
timeout or the missing file to see how a crashing fixture really fails.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from run_candidates import build, load  # same directory: Python puts the script's dir on sys.path


def main() -> None:
    problem_path, candidate_path, done, *rest = sys.argv[1:]
    device = rest[0] if rest else "cpu"
    problem = load(Path(problem_path), "problem_under_test")
    candidate = build(load(Path(candidate_path), "candidate").ModelNew, problem.get_init_inputs(), 0, device)
    torch.manual_seed(0)
    inputs = [t.to(device) for t in problem.get_inputs()]
    Path(done + ".calling").write_text("calling forward")
    with torch.no_grad():
        candidate(*inputs)
    if device != "cpu":
        torch.cuda.synchronize()
    Path(done).write_text("returned")


if __name__ == "__main__":
    main()
