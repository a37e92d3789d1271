"""The README's main command as a newcomer types it, on a machine with no GPU and no key: it solves
the example, says what was verified, and exits 0 (a CPU run that reached only the CPU path is a
qualified success, not a failure)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_kiln_run_examples_softmax_exits_zero_and_says_what_it_verified(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text()
    assert "kiln run examples/softmax.py" in readme
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    kiln = Path(sys.executable).with_name("kiln")
    done = subprocess.run([str(kiln), "run", "examples/softmax.py", "--out", str(tmp_path / "run")], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    status = re.search(r"^status: (\S+)", done.stdout, re.M)
    assert status and status[1] in ("solved", "solved_cpu_only"), done.stdout
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == status[1] and summary["best"]["correct"]
    if status[1] == "solved_cpu_only":
        assert "verified: CPU branch only" in done.stdout
