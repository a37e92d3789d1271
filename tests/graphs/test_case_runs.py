"""A Proposer case's reference runs once per case, under the run's isolation and case timeout, also
when the run is handed an LLM Proposer built by `resolve_roles` (issue 27: it ran twice, the first
time best-effort and with the Proposer's own time limit)."""

from __future__ import annotations

import json

from graph_helpers import PROBLEM, CountingEvaluator, case_source, reply

from kiln.agents import casecheck
from kiln.agents.base import GpuFacts
from kiln.agents.registry import resolve_roles
from kiln.graphs.runner import run_problem


def test_an_llm_proposers_case_runs_its_reference_once_sandboxed_and_timed(tmp_path, monkeypatch):
    case = case_source(301)
    script = tmp_path / "chat.json"
    script.write_text(json.dumps({
        "coder": [reply("good")],
        "judge": [{"structured": {"mode": "optimization", "diagnosis": "fine", "bottleneck": None, "evidence": [],
                                  "plan": "", "next": "stop", "stop_reason": "done"}}],
        "proposer": [{"structured": {"cases": [{"name": "rows_301", "source": case, "rationale": "two blocks"}]}}],
    }))
    runs: list[dict] = []
    real = casecheck.run_runner

    def counting(case_src: str, **kw):  # noqa: ANN202 - the real runner's result
        runs.append({"source": case_src, **kw})
        return real(case_src, **kw)

    monkeypatch.setattr(casecheck, "run_runner", counting)
    roles = resolve_roles(f"scripted:{script}", env={})  # as a Python caller builds them
    summary = run_problem(PROBLEM, out=tmp_path / "run", roles=roles, evaluator=CountingEvaluator(), gpu=GpuFacts(),
                          device="cpu", trials=1, isolation="strict", case_timeout_s=45)
    assert summary.stress_cases == 1
    of_case = [r for r in runs if r["source"] == case]
    assert len(of_case) == 1, of_case
    assert of_case[0]["isolation"] == "strict" and of_case[0]["timeout_s"] == 45
