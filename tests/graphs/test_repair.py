"""Repair after a compile error and after a mismatch; a Proposer counterexample leading to a
repair; Proposer cases validated against the reference first. One run, real checks."""

from __future__ import annotations

import json

from graph_helpers import case_source, judge, kernel, reply, roles, run

from kiln.graphs.rundir import events


def test_compile_error_mismatch_and_counterexample_are_repaired(tmp_path):
    changed_model = case_source(50).replace("2.0 * torch.relu(x)", "3.0 * torch.relu(x)")
    broken_inputs = case_source(50).replace("return [torch.rand(rows, cols)]", "raise ValueError('no inputs')")
    proposer = [{"cases": [{"name": "rows 300 (past one block)", "source": case_source(300)},
                           {"name": "other model", "source": changed_model},
                           {"name": "broken", "source": broken_inputs}]},
                {"cases": []}]
    r = roles([reply("compile_error"), reply("no_relu"), reply("one_block"), reply("good")],
              [judge("repair", plan="fix it")], proposer)
    summary = run(tmp_path, r, max_iters=6)
    run_dir = tmp_path / "run"

    tasks = r.coder.tasks
    assert [t.mode for t in tasks] == ["generate", "repair", "repair", "repair"]
    assert "relu_does_not_exist" in tasks[1].feedback  # the compile error reached the Coder
    assert tasks[1].last_src == kernel("compile_error")
    assert "Mismatch" in tasks[2].feedback and tasks[2].last_src == kernel("no_relu")
    assert "Counterexample" in tasks[3].feedback and "rows = 300" in tasks[3].feedback  # the minimal repro
    assert tasks[3].last_src == kernel("one_block")

    cases = {c["name"]: c for c in events(run_dir) if c["kind"] == "case"}
    assert cases["rows_300_past_one_block"]["valid"]
    assert not cases["other_model"]["valid"] and "Model differs" in cases["other_model"]["reason"]
    assert not cases["broken"]["valid"] and "ValueError" in cases["broken"]["reason"]

    assert summary.status == "solved" and summary.best.correct
    assert (run_dir / "best_kernel.py").read_text() == kernel("good")
    final = json.loads((run_dir / summary.best.check_path).read_text())
    assert any(t["case"] == "rows_300_past_one_block" and t["passed"] for t in final["correctness"]["trials"])
    assert summary.stress_cases == 1 and summary.iterations == 4
    rewards = [json.loads(line) for line in (run_dir / "rewards.jsonl").read_text().splitlines()]
    by_id = {x["candidate"]: x for x in rewards}
    assert by_id["c0001"]["reward"] == 0.0 and by_id["c0004"]["reward"] == 1.0
    assert 0 < by_id["c0002"]["reward"] < 1  # passes some trials (positive inputs), not the negated ones
    assert by_id["c0003"]["correct"] is False  # it failed the counterexample on re-check
