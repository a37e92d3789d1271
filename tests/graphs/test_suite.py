"""The suite changes mid-run, and verdicts follow it (issues 12 and 16): a new stress case re-judges
the old best before it ranks; a case a passing kernel cannot finish in time is retired by rule; when
no kernel passes the final suite the summary says so; the Judge sees the failing case and hears
when a rule overrode it; the Coder's "best kernel" label is true."""

from __future__ import annotations

import json

from graph_helpers import CountingEvaluator, case_source, judge, kernel, reply, roles, run

from kiln.agents.coder import LLMCoder
from kiln.graphs.rundir import events


def test_a_new_case_rejudges_the_old_best_before_it_ranks(tmp_path):
    """Beam round 1 writes two kernels that pass the problem; the stressed one (c0001) fails the new
    case. c0002 passed only the older suite: it is checked again with the case at once, passes,
    and the run is solved without a second Proposer round."""
    r = roles([reply("one_block"), reply("good")], [judge("repair")],
              [{"cases": [{"name": "rows_300", "source": case_source(300)}]}, {"cases": []}])
    ev = CountingEvaluator()
    summary = run(tmp_path, r, ev, strategy="beam", beam_children=2, beam_width=2, max_iters=3)
    assert summary.status == "solved" and summary.best.candidate == "c0002" and summary.best.correct
    assert len(r.proposer.inputs) == 1  # no second round just to re-check c0002
    rechecks = [e for e in events(tmp_path / "run") if e["kind"] == "recheck"]
    assert [e["id"] for e in rechecks] == ["c0002"] and rechecks[0]["suite"] == ["rows_300"]
    assert [cases for src, cases in ev.calls if src == kernel("good")] == [[], ["rows_300"]]


def test_no_kernel_passing_the_final_suite_is_said_plainly(tmp_path):
    r = roles([reply("one_block"), reply("no_relu"), reply("no_relu")],
              [judge("stop", stop_reason="looks fine"), judge("repair")],
              [{"cases": [{"name": "rows_300", "source": case_source(300)}]}])
    summary = run(tmp_path, r, max_iters=3)
    data = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary.status == "budget" and not summary.best.correct
    assert data["suite_note"].startswith("no kernel passes every case of the final suite (the problem, rows_300)")
    # the Judge saw the failing case's sizes and source, and then heard that its 'stop' was refused
    first, second = r.judge.inputs[0], r.judge.inputs[1]
    assert first.failing_case.name == "rows_300" and "rows = 300, cols = 129" in first.failing_case.sizes
    assert "rows = 300" in first.failing_case.source
    assert second.last_override and "'stop'" in second.last_override and "c0001" in second.last_override
    assert len(r.judge.inputs) == 2  # not asked after the last Coder round
    # the Coder was told the truth about the best kernel it was shown
    task = r.coder.tasks[1]
    assert task.best_src == kernel("one_block") and not task.best_correct
    _, user = LLMCoder(client=None).messages(task)
    assert "The best kernel so far (NOT correct: it fails the stress case(s) rows_300)" in user.content
    assert "(correct" not in user.content


def test_a_case_a_passing_kernel_cannot_finish_is_retired(tmp_path):
    """Issue 25 item 3: the new case is timed with one trial first; its planned calls cannot fit in
    what the problem's trials leave, so it is retired unverified before any full check (no full
    check runs out of time on it), with its measured cost, and the stop reason names it."""
    big = case_source(1000)  # 129k elements (27x the problem's): minutes per call for this kernel
    r = roles([reply("slow_large")], [judge("repair")],
              [{"cases": [{"name": "rows_1000", "source": big}]}, {"cases": []}])
    summary = run(tmp_path, r, max_iters=2, check_timeout=30)
    assert summary.status == "solved" and summary.best.correct, summary.stop_reason
    assert list(summary.retired_cases) == ["rows_1000"]
    reason = summary.retired_cases["rows_1000"]
    assert reason.startswith("retired unverified before its full check: at least"), reason
    assert "its one-trial timing ran out of time" in reason and "its 14 planned calls need about" in reason
    assert "stress tests pass, except 1 retired unverified (too slow to check): rows_1000" in summary.stop_reason
    evs = events(tmp_path / "run")
    assert [e["name"] for e in evs if e["kind"] == "case_retired"] == ["rows_1000"]
    assert [e["status"] for e in evs if e["kind"] == "probe"] == ["timeout"]
    assert all(e["status"] == "ok" for e in evs if e["kind"] == "check")  # no full check ran out of time
    assert not (tmp_path / "run" / "candidates" / "c0001" / "check_1.json").exists()


def test_cases_are_admitted_cheapest_first_within_the_room():
    from kiln.graphs.admit import Admission, _choose
    from kiln.graphs.state import StressCase

    cases = [StressCase(name=n, path=f"cases/{n}.py", valid=True, round=1) for n in ("wide", "edge", "mid")]
    rates = {"wide": (2.0, False), "edge": (0.1, False), "mid": (0.5, False)}
    out = Admission()
    _choose(out, cases, rates, room=40.0, per_case=52, budget=90.0)  # 5.2 s + 26 s fit; 104 s does not
    assert [c.name for c in out.admitted] == ["edge", "mid"] and list(out.retired) == ["wide"]
    assert "2.00 s per call (one trial measured), so its 52 planned calls need about 104 s" in out.retired["wide"]
    assert "leaves about 9 s for new cases" in out.retired["wide"]


def _timeout_record(trials: list[tuple[str, bool]], where: str = "big", cases: dict | None = None,
                    secs: dict[str, float] | None = None, planned: int = 28):
    from kiln.tools.records import CheckRecord, CorrectnessRecord, TrialRecord

    secs = secs or {"problem": 0.01, "big": 2.0, "small": 0.02}
    rows = [TrialRecord(case=c, distribution="x1", trial=i, passed=p, candidate_s=secs.get(c))
            for i, (c, p) in enumerate(trials)]
    return CheckRecord(problem="p.py", candidate="c.py", status="timeout",
                       reasons=[f"timed out in stage correctness ({where}/x3/trial 0): stage 'correctness' "
                                "exceeded its 9 s timeout"],
                       correctness=CorrectnessRecord(atol=1e-4, rtol=1e-4, n_trials=len(rows),
                                                     n_passed=sum(p for _, p in trials), trials=rows, n_planned=planned,
                                                     cases=cases or {}))


def _suite(numel: int | None = 1000, problem: int | None = 100, small: bool = False):
    from kiln.graphs.state import StressCase
    from kiln.graphs.suite import Suite

    case = StressCase(name="big", path="cases/big.py", valid=True, round=1, input_numel=numel, reference_s=0.2)
    extra = [StressCase(name="small", path="cases/small.py", valid=True, round=1, input_numel=50)] if small else []
    return Suite([case, *extra], problem_numel=problem)


def test_the_retirement_rule_is_narrow():
    from kiln.graphs.suite import Suite, slow_case
    from kiln.tools.records import CaseSummary

    passing = [("problem", True), ("big", True)]
    name, reason = slow_case(_timeout_record(passing), _suite(), "c1", "cpu", 9.0)
    # its call in flight took at least the 9 s stage less the 2.01 s the finished calls took
    assert name == "big" and "this case costs the most: 7.0 s per candidate call" in reason, reason
    assert slow_case(_timeout_record([("problem", True), ("big", False)]), _suite(), "c1", "cpu", 9.0) is None
    slow_problem = _timeout_record(passing, where="problem", secs={"problem": 1.0, "big": 0.5})
    assert slow_case(slow_problem, _suite(), "c1", "cpu", 9.0) is None  # the problem itself costs the most: it stays
    assert slow_case(_timeout_record(passing), Suite([]), "c1", "cpu", 9.0) is None  # not in the suite
    # not one call on it finished: retired only when it is a large case (10x the problem's inputs here)
    never = [("problem", True)]
    name, reason = slow_case(_timeout_record(never), _suite(), "c1", "cpu", 9.0)
    assert name == "big" and "its inputs are 10x the problem's" in reason and "at least 9.0 s" in reason
    assert slow_case(_timeout_record(never), _suite(numel=200), "c1", "cpu", 9.0) is None  # 2x: a hang is a bug
    assert slow_case(_timeout_record(never), _suite(problem=None), "c1", "cpu", 9.0) is None  # size unknown
    # the check's own per-case summary, when it has one, names the case the time ran out in
    own = {"problem": CaseSummary(n_trials=8, n_passed=8, candidate_s=0.01),
           "big": CaseSummary(n_trials=1, n_passed=1, candidate_s=22.4, reference_s=0.2, timed_out=True)}
    name, reason = slow_case(_timeout_record(passing, where="elsewhere", cases=own), _suite(), "c1", "cpu", 9.0)
    assert name == "big" and "under the Triton interpreter" in reason and "0.20 s per trial" in reason


def test_the_case_that_broke_the_budget_is_retired_not_the_one_running():
    """Issue 25 item 3: the time ran out in `small` (0.02 s a call), but `big` (2 s a call, 14 calls
    planned: 28 s against a 9 s stage) is what broke the budget."""
    from kiln.graphs.suite import slow_case

    trials = [("problem", True)] * 4 + [("big", True)] * 4 + [("small", True)] * 2
    name, reason = slow_case(_timeout_record(trials, where="small", planned=42), _suite(small=True), "c1", "cpu", 9.0)
    assert name == "big" and "about 28 s for its planned calls" in reason, reason


def test_timeout_feedback_gives_per_case_times():
    """Per call, from the trial records (the per-case totals add a trial's two calls): the Coder's
    repair prompt and the Judge's evaluation render the same figures from one source."""
    from kiln.agents.checkcost import check_cost
    from kiln.graphs.checks import failure_text
    from kiln.tools.records import CaseSummary

    own = {"problem": CaseSummary(n_trials=1, n_passed=1, candidate_s=0.7, reference_s=0.24),  # totals, 2 calls
           "big": CaseSummary(n_trials=1, n_passed=1, candidate_s=22.4, reference_s=0.2, timed_out=True)}
    record = _timeout_record([("problem", True), ("problem", True), ("big", True)], cases=own)
    for i, secs in enumerate((0.3, 0.4, 22.4)):
        record.correctness.trials[i].candidate_s = secs
    record.correctness.trials[1].phase = "second_call"  # one trial, two calls
    text = failure_text(record)
    assert text.startswith("Status: timeout.") and "Reason: timed out in stage correctness (big/x3" in text
    cost = check_cost(record, cases=["big"])
    from kiln.agents import prompts

    lines = prompts.render("check_cost_lines.j2", cost=cost)
    assert "- problem: 2 of 14 calls done, 2 passed, 0.35 s per candidate call (reference 0.24 s per trial" in lines
    assert "- big: 1 of 14 calls done, 1 passed, 22.40 s per candidate call (reference 0.20 s per trial of two calls); " \
           "the time ran out here" in lines
