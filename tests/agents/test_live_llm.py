"""Opt-in (`-m live_llm`, costs money): a real model writes a kernel that passes kiln's check.

KILN_LIVE_LLM picks the spec (default openai:gpt-4.1-mini); its provider's key must be set.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kiln.agents.base import CoderTask
from kiln.agents.llm.usage import Budgets
from kiln.agents.registry import resolve_roles
from kiln.tools.check import check
from kiln.tools.records import CheckOptions

SPEC = os.environ.get("KILN_LIVE_LLM", "openai:gpt-4.1-mini")
KEY_VAR = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}[SPEC.split(":")[0]]


@pytest.mark.live_llm
@pytest.mark.skipif(not os.environ.get(KEY_VAR), reason=f"{KEY_VAR} not set")
def test_live_model_writes_a_correct_triton_kernel(tmp_path):
    roles = resolve_roles(SPEC, budgets=Budgets(tokens=60_000), cache_path=tmp_path / "cache.sqlite")
    problem = Path(__file__).parent / "data" / "relu.py"
    reply = roles.coder.write(CoderTask(mode="generate", problem_name="relu", problem_src=problem.read_text()))
    assert reply.ok, reply.error
    assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0
    cand = tmp_path / "cand.py"
    cand.write_text(reply.source)
    rec = check(problem, cand, CheckOptions(device="auto", trials=2))
    assert rec.correctness is not None and rec.correctness.passed, (rec.status, rec.reasons)
