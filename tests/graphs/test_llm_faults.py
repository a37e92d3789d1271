"""LLM-side faults of issue 25 (items 13-15), through the whole graph on scripted chat models (real
prompts, structured output, the real evaluator): spend after a budget stop counts every answered
request; a reference with no finite output, or a problem file too big for any prompt, is refused in
one line before any LLM call."""

from __future__ import annotations

import json

import pytest
from graph_helpers import PROBLEM, CountingEvaluator, reply

from kiln.agents.base import GpuFacts
from kiln.graphs.runner import run_problem
from kiln.tools.errors import KilnInputError

USAGE = {"input_tokens": 1000, "output_tokens": 1000}


def _script(tmp_path, **roles) -> str:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(roles))
    return f"scripted:{path}"


def test_spend_after_a_budget_stop_counts_every_answered_request(tmp_path):
    """The Proposer's first reply is answered (2,000 tokens) but unusable; its retry finds the
    token budget spent. That answered request is in summary.json's totals, as the budget saw it
    (before: 2,000 tokens reported against 4,000 spent)."""
    llm = _script(tmp_path, coder=[{"content": reply("good"), "usage": USAGE}],
                  proposer=[{"structured": {"not_cases": 1}, "usage": USAGE}])
    summary = run_problem(PROBLEM, out=tmp_path / "run", llm=llm, evaluator=CountingEvaluator(), gpu=GpuFacts(),
                          device="cpu", trials=1, budget_tokens=3000)
    assert summary.status == "budget", summary.stop_reason
    assert summary.tokens == 4000 and summary.usage_by_role["proposer"].input_tokens == 1000
    data = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert data["tokens"] == 4000


def test_a_reference_with_no_finite_output_is_refused_before_any_llm_call(tmp_path):
    problem = tmp_path / "nan_ref.py"
    problem.write_text(PROBLEM.read_text().replace("return 2.0 * torch.relu(x)", "return torch.log(x - 2.0)"))
    llm = _script(tmp_path, coder=[])  # any Coder call would run the script dry: IndexError
    with pytest.raises(KilnInputError) as err:
        run_problem(problem, out=tmp_path / "run", llm=llm, evaluator=CountingEvaluator(), gpu=GpuFacts(),
                    device="cpu", trials=1)
    message = str(err.value)
    assert "\n" not in message and "nan_ref.py" in message
    assert "no element of the output is finite" in message and "NaN" in message, message
    assert not (tmp_path / "run" / "llm").exists()


def test_a_huge_problem_file_is_refused_in_one_line(tmp_path):
    problem = tmp_path / "huge.py"
    problem.write_text(PROBLEM.read_text() + "\n# " + "x" * 2_000_000 + "\n")
    with pytest.raises(KilnInputError) as err:
        run_problem(problem, out=tmp_path / "run", llm=_script(tmp_path, coder=[]), evaluator=CountingEvaluator(),
                    gpu=GpuFacts(), device="cpu")
    message = str(err.value)
    assert "\n" not in message and "over kiln's limit of 65,536 bytes" in message, message
    assert not (tmp_path / "run").exists()
