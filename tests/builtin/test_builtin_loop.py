"""The three built-in policies in a loop through kiln's real check pipeline (CPU, interpreter):
a broken candidate is caught and repaired, stress cases are proposed and pass, the Judge stops."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln.agents.base import CoderTask, JudgeInput, ProposerInput
from kiln.agents.builtin import BuiltinCoder, BuiltinJudge, BuiltinProposer
from kiln.agents.builtin.source import read_header
from kiln.tools.check import check
from kiln.tools.records import CheckOptions

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


OPTS = CheckOptions(device="cpu", trials=1, timeout_s=600)


@pytest.mark.slow
def test_repair_stress_and_stop_through_the_real_check(tmp_path: Path) -> None:
    problem = EXAMPLES / "softmax.py"
    src = problem.read_text()
    coder, judge, proposer = BuiltinCoder(), BuiltinJudge(), BuiltinProposer()
    first = coder.write(CoderTask(mode="generate", problem_name="softmax", problem_src=src)).source
    assert first is not None
    broken = tmp_path / "cand_0.py"
    broken.write_text(first.replace("v5 = (v3 / v4)", "v5 = (v3 / (v4 + 0.01))"))
    rec = check(problem, broken, OPTS)
    assert rec.status == "incorrect"
    d = judge.decide(JudgeInput(problem_name="softmax", problem_src=src, candidate_src=broken.read_text(), check=rec))
    assert d.next == "repair"

    fixed = coder.write(CoderTask(mode="repair", problem_name="softmax", problem_src=src,
                                  last_src=broken.read_text(), feedback=d.plan)).source  # fmt: skip
    assert fixed is not None and read_header(fixed).knobs != read_header(first).knobs
    cand = tmp_path / "cand_1.py"
    cand.write_text(fixed)
    reply = proposer.propose(ProposerInput(problem_name="softmax", problem_src=src, candidate_src=fixed, max_cases=2))
    cases = []
    for c in reply.cases:
        (tmp_path / f"{c.name}.py").write_text(c.source)
        cases.append(str(tmp_path / f"{c.name}.py"))
    rec = check(problem, cand, OPTS.model_copy(update={"cases": cases}))
    assert rec.status == "ok" and rec.correct, rec.reasons
    assert {t.case for t in rec.correctness.trials} >= {"problem", "dim_513", "dim_97"}
    d = judge.decide(JudgeInput(problem_name="softmax", problem_src=src, candidate_src=fixed, check=rec,
                                stress_passed=True, stress_cases=len(cases)))  # fmt: skip
    assert d.next == "stop" and "speed not measured" in (d.stop_reason or "")
