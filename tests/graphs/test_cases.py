"""Proposer cases are validated against the reference before any candidate sees them."""

from __future__ import annotations

from graph_helpers import PROBLEM, case_source

from kiln.graphs.cases import run_reference, safe_name, static_problem


def test_static_gate_keeps_the_problems_model():
    problem = PROBLEM.read_text()
    assert static_problem(case_source(1025), problem) is None
    assert "Model differs" in static_problem(case_source(5).replace("2.0 *", "3.0 *"), problem)
    assert "missing get_inputs" in static_problem(case_source(5).replace("def get_inputs", "def inputs"), problem)
    assert "syntax error at line" in static_problem("def (", problem)


def test_reference_gate_rejects_failing_and_slow_cases(tmp_path):
    ok = tmp_path / "ok.py"
    ok.write_text(case_source(3))
    assert run_reference(ok, "cpu", timeout_s=120) is None
    wrong = tmp_path / "wrong.py"
    wrong.write_text(case_source(3).replace("return [torch.rand(rows, cols)]", "return ['not a tensor']"))
    assert "the reference fails on it" in run_reference(wrong, "cpu", timeout_s=120)
    nan = tmp_path / "nan.py"  # issue 25: a case whose reference output is all NaN checks nothing
    nan.write_text(case_source(3).replace("def get_inputs():\n    return [torch.rand(rows, cols)]",
                                          "def get_inputs():\n    return [torch.full((rows, cols), float('nan'))]"))
    assert "no element of the output is finite (387 NaN" in run_reference(nan, "cpu", timeout_s=120)
    slow = tmp_path / "slow.py"
    slow.write_text(case_source(3).replace("def get_inputs():", "def get_inputs():\n    import time; time.sleep(60)"))
    assert "too slow" in run_reference(slow, "cpu", timeout_s=2)


def test_case_names_are_file_stem_safe_and_unique():
    assert safe_name("rows 300 (past one block)", set()) == "rows_300_past_one_block"
    assert safe_name("1025", set()) == "case_1025"
    assert safe_name("edge", {"edge"}) == "edge_2"
    assert safe_name("problem", set()) == "problem_2"
