"""Issue 22's CPU figure: `kiln check` of a 128x512 row softmax (a Triton candidate, the interpreter),
each row a fresh process on this machine; the first row also starts kiln's fork server cold.

    .venv/bin/python bench/cpu_check.py [--runs 3] [--fork-server resident|process]

Target: <= 10 s a check on the 2-core CI machine kind.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--fork-server", choices=("resident", "process"), default="resident",
                    help="KILN_FORK_SERVER for the runs (resident: the first run starts a server the others reuse)")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="kiln-cpu-check-"))
    problem = tmp / "softmax_128x512.py"
    problem.write_text((FIXTURES / "problems" / "row_softmax.py").read_text()
                       .replace("rows = 37", "rows = 128").replace("cols = 1000", "cols = 512"))
    cand = FIXTURES / "kernels" / "correct" / "triton" / "row_softmax.py"
    env = {**os.environ, "KILN_CACHE_DIR": str(tmp / "cache"), "KILN_FORK_SERVER": a.fork_server}
    for i in range(a.runs):
        out = tmp / f"rec{i}.json"
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-m", "kiln.evals.cli", "check", str(problem), str(cand), "--device", "cpu",
                        "--json", str(out)], env=env, capture_output=True, text=True, timeout=600)
        rec = json.loads(out.read_text()) if out.exists() else {}
        print(json.dumps({"run": i, "wall_s": round(time.monotonic() - t0, 2), "status": rec.get("status"),
                          "fork_server": (rec.get("evidence") or {}).get("fork_server"),
                          "stages_s": rec.get("stages_s")}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
