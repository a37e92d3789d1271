"""How long each `kiln` command takes before it does anything (issue 26's start-up goals): fresh
processes, the median of --repeat runs each. Prints one Markdown table row per command.

    python3 bench/cli_startup.py [--kiln .venv/bin/kiln] [--repeat 5] [--doctor]

Goals on the 2-core CPU machine: `--version` and `CMD --help` <= 1 s, a bad-input error <= 2 s,
`kiln doctor` <= 10 s. The machine is shared: read the median, and the load average printed first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROBLEM = REPO / "tests" / "fixtures" / "problems" / "relu.py"
HELPS = ["run", "eval", "check", "report", "model", "ui", "profile", "doctor", "curriculum"]


def cases(scratch: Path) -> list[tuple[str, list[str]]]:
    """(label, argv after `kiln`): the commands a newcomer types first."""
    bad = [("run missing.py", ["run", "missing.py"]),
           ("run --max-iters 0", ["run", str(PROBLEM), "--max-iters", "0", "--device", "cpu"]),
           ("run --out /proc/1/x", ["run", str(PROBLEM), "--out", "/proc/1/x"]),
           ("eval missing-dir", ["eval", str(scratch / "missing")]),
           ("check missing.py x.py", ["check", "missing.py", "x.py"]),
           ("report not-a-run", ["report", str(scratch)])]
    return [("--version", ["--version"]), ("--help", ["--help"]),
            *[(f"{c} --help", [c, "--help"]) for c in HELPS], *bad]


def once(kiln: str, argv: list[str]) -> tuple[float, int]:
    t0 = time.monotonic()
    done = subprocess.run([kiln, *argv], capture_output=True, text=True, timeout=600, cwd=tempfile.gettempdir())
    return time.monotonic() - t0, done.returncode


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default=str(REPO / ".venv" / "bin" / "kiln"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--doctor", action="store_true", help="also time `kiln doctor` (3 runs)")
    a = ap.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; cores: {os.cpu_count()}")
    print("| command | median s | min s | max s | exit |\n|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        todo = cases(Path(tmp)) + ([("doctor", ["doctor"])] if a.doctor else [])
        for label, argv in todo:
            runs = [once(a.kiln, argv) for _ in range(3 if label == "doctor" else a.repeat)]
            secs = [s for s, _ in runs]
            print(f"| `kiln {label}` | {statistics.median(secs):.2f} | {min(secs):.2f} | {max(secs):.2f} "
                  f"| {runs[-1][1]} |", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
