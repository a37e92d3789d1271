"""Optimize after a pass; stop at the target; never 'solved' with a failing kernel; each budget
stops the run cleanly and keeps its best kernel."""

from __future__ import annotations

import pytest
from graph_helpers import TimedEvaluator, judge, kernel, reply, roles, run

from kiln.graphs.rundir import events
from kiln.tools.profile.records import KernelProfile, ProfileReport

PROFILE = ProfileReport(source="ncu", candidate="kernel.py", kernels=[
    KernelProfile(name="relu", duration_us=12.0, bound="memory", dram_pct=41.0, roofline_pct=41.0, grid=[5, 1, 1])])


def test_optimize_after_pass_then_stop_at_target(tmp_path):
    ev = TimedEvaluator({kernel("good"): 0.8, kernel("good_wide"): 1.6})
    r = roles([reply("good"), reply("good_wide")],
              [judge("optimize", bottleneck="too many programs", plan="use 2048-element blocks")])
    profiled = []

    def profiler(problem, candidate):  # stands in for kiln.tools.profile on a GPU
        profiled.append(candidate.read_text())
        return PROFILE, None

    summary = run(tmp_path, r, ev, target_speedup=1.5, max_iters=5, profiler=profiler)

    assert [t.mode for t in r.coder.tasks] == ["generate", "optimize"]
    assert profiled == [kernel("good"), kernel("good_wide")]  # each correct frontier kernel, once
    assert r.judge.inputs[0].profile == PROFILE  # the profile reached the Judge, typed
    folder = tmp_path / "run" / "candidates" / "c0001"
    assert ProfileReport.model_validate_json((folder / "profile.json").read_text()) == PROFILE
    assert "DRAM 41%" in (folder / "profile.txt").read_text()  # its digest, for people
    second = r.coder.tasks[1]
    assert "2048-element blocks" in second.feedback and second.best_src == kernel("good")
    assert r.judge.inputs[0].check.correct and r.judge.inputs[0].target_speedup == 1.5
    assert summary.status == "solved" and "target met" in summary.stop_reason
    assert summary.best.candidate == "c0002" and summary.best.speedup_vs_eager == pytest.approx(1.6)
    assert summary.speed_measured and summary.stress_rounds == 1  # stress ran before 'solved'


def test_judge_cannot_stop_with_a_failing_kernel(tmp_path):
    r = roles([reply("no_relu")], [judge("stop", stop_reason="looks solved to me")])
    summary = run(tmp_path, r, max_iters=2)

    assert summary.status == "budget" and "iteration" in summary.stop_reason
    assert not summary.best.correct
    routes = [e for e in events(tmp_path / "run") if e["kind"] == "route"]
    assert routes and all(e["goto"] != "finish" or e["judge_next"] != "stop" for e in routes)
    assert routes[0]["judge_next"] == "repair"  # the stop was overridden
    assert [t.mode for t in r.coder.tasks] == ["generate", "repair"]


@pytest.mark.parametrize(("budget", "kw", "words"), [
    ("tokens", {"budget_tokens": 1000}, "token budget"),
    ("usd", {"budget_usd": 0.03}, "cost budget"),
    ("minutes", {"budget_minutes": 0.001}, "time budget"),
])
def test_each_budget_stops_the_run_and_keeps_the_best(tmp_path, budget, kw, words):
    r = roles([reply("no_relu")], [judge("repair")], tokens_per_call=600, usd_per_call=0.02)
    summary = run(tmp_path, r, max_iters=10, **kw)

    assert summary.status == "budget" and words in summary.stop_reason
    assert summary.iterations == 1 and summary.candidates == 1  # no Coder call once a budget is spent
    assert summary.best.candidate == "c0001" and (tmp_path / "run" / "best_kernel.py").exists()
    if budget != "minutes":  # Coder then Judge, 600 tokens and $0.02 each: the second call crosses
        assert summary.tokens == 1200 and summary.cost_usd == pytest.approx(0.04)


def test_recursion_limit_is_a_backstop_that_still_writes_the_summary(tmp_path):
    r = roles(["I would rather not write code."], [judge("repair")])
    summary = run(tmp_path, r, max_iters=50, no_progress=50, recursion_limit=9)
    assert summary.status == "stopped" and "recursion limit (9 steps)" in summary.stop_reason
    assert summary.iterations >= 2 and summary.best.path is None  # no code ever: nothing to keep
    assert r.coder.tasks[1].feedback.startswith("no fenced python code block")
