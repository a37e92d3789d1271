"""`kiln run` end to end on CPU with every role on a local OpenAI-compatible server, and a planted
API key that must not appear anywhere in the finished run directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import completion
from .helpers import GOOD_KERNEL, case_source

PLANTED = "sk-test-PLANTED-run-0123456789abcdef"
PROBLEM = Path(__file__).parent / "data" / "softmax.py"
VERDICT = {"mode": "optimization", "diagnosis": "fine", "bottleneck": None, "evidence": [], "plan": "",
           "next": "stop", "stop_reason": "done"}


def respond(req: dict) -> dict:
    """Answer by role: the structured-output schema names the Judge and the Proposer."""
    schema = (req.get("response_format") or {}).get("json_schema", {}).get("name")
    if schema == "JudgeVerdict":
        return completion(json.dumps(VERDICT))
    if schema == "ProposedCases":
        case = {"name": "edge_1025", "source": case_source("return [torch.rand(1, 1025)]"), "rationale": "r"}
        return completion(json.dumps({"cases": [case]}))
    # the Coder; its reply even quotes the key, as a confused model might
    return completion(f"Using key {PLANTED}.\n```python\n{GOOD_KERNEL}```", tokens=(3000, 400))


@pytest.mark.slow
def test_kiln_run_with_local_server_and_no_key_leak(oai_server, tmp_path):
    oai_server.responder = respond
    out = tmp_path / "run"
    env = {**os.environ, "OPENAI_API_KEY": PLANTED}
    cmd = [sys.executable, "-m", "kiln.evals.cli", "run", str(PROBLEM), "--llm", "openai:local-model",
           "--base-url", oai_server.url, "--device", "cpu", "--out", str(out), "--quiet",
           "--max-iters", "2", "--trials", "1"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=540)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "solved" and summary["best"]["correct"]
    assert summary["usage_by_role"]["coder"]["input_tokens"] == 3000
    assert oai_server.requests and all(r["headers"]["authorization"] == f"Bearer {PLANTED}"
                                       for r in oai_server.requests)
    leaks = [p for p in out.rglob("*") if p.is_file() and PLANTED.encode() in p.read_bytes()]
    assert leaks == []
    assert PLANTED not in proc.stdout + proc.stderr
