"""One precedence for every command: defaults < config file < KILN_<COMMAND>_<FLAG> < flags."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

FIX = Path(__file__).parents[1] / "fixtures"
PROBLEM = FIX / "problems" / "relu.py"
CANDIDATE = FIX / "kernels" / "correct" / "triton" / "relu.py"


def check(cwd: Path, *flags: str, env: dict[str, str] | None = None) -> dict:
    out = cwd / "rec.json"
    out.unlink(missing_ok=True)
    proc = subprocess.run([sys.executable, "-m", "kiln.evals.cli", *[f for f in flags[:2] if f], "check", str(PROBLEM), str(CANDIDATE),
                           "--device", "cpu", "--json", str(out), *flags[2:]], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(env or {})})
    assert out.exists(), proc.stderr[-2000:]
    return json.loads(out.read_text())


def test_file_then_environment_then_flags(tmp_path: Path) -> None:
    (tmp_path / "kiln.toml").write_text('[check]\ntrials = 1\ndtype = "bf16"\n')
    from_file = check(tmp_path, "", "")
    assert from_file["dtype"] == "bf16" and from_file["status"] == "unsupported"  # the interpreter lacks bf16
    from_env = check(tmp_path, "", "", env={"KILN_CHECK_DTYPE": "fp32"})
    assert from_env["dtype"] == "fp32" and from_env["status"] == "ok"
    assert from_env["correctness"]["n_trials"] == 14  # trials = 1 from the file: 7 distributions x before/after
    from_flag = check(tmp_path, "", "", "--dtype", "bf16", env={"KILN_CHECK_DTYPE": "fp32"})
    assert from_flag["dtype"] == "bf16"


def test_explicit_config_file_and_secrets_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "other.toml"
    cfg.write_text('[check]\ndtype = "bf16"\ntrials = 1\n')
    assert check(tmp_path, "--config", str(cfg))["dtype"] == "bf16"
    cfg.write_text('[run]\napi_key = "sk-should-not-be-here"\n')
    proc = subprocess.run([sys.executable, "-m", "kiln.evals.cli", "--config", str(cfg), "doctor"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "secrets don't go in the config file" in proc.stderr
    assert "sk-should-not-be-here" not in proc.stderr
