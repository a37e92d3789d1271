"""LLM failures end a run with their own status and cause, never as `budget (iteration budget spent)`.

Each test runs the whole `kiln run` loop with the real `langchain-openai` client against a local
server (or a closed port), and reads `summary.json` and the console as a user would.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kiln.agents.base import GpuFacts
from kiln.agents.llm.transport import TransportSettings
from kiln.agents.llm.usage import Budgets
from kiln.agents.registry import resolve_roles
from kiln.graphs.runner import run_problem

from .conftest import completion

PROBLEM = Path(__file__).parent / "data" / "softmax.py"
QUICK = TransportSettings(timeout_s=5.0, max_attempts=2, backoff_base_s=0.01, backoff_max_s=0.02)


class NoChecks:
    """No check may run in these tests: no candidate ever has code."""

    def check(self, problem, candidate, options):  # noqa: ANN001, ANN201
        raise AssertionError("no kernel was written, so nothing may be checked")


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def hanging_up_url() -> str:
    """A server that accepts each connection and closes it at once: reachable (kiln's start-up check
    passes), yet every LLM call fails with a connection error."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)

    def serve() -> None:
        while True:
            conn, _ = srv.accept()
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{srv.getsockname()[1]}/v1"


def run(url: str, tmp_path: Path, budgets: Budgets | None = None, transport: TransportSettings = QUICK, **opts):
    roles = resolve_roles("openai:local-model", base_url=url, env={}, transport=transport,
                          budgets=budgets or Budgets(), device="cpu")
    summary = run_problem(PROBLEM, out=tmp_path / "run", roles=roles, evaluator=NoChecks(), gpu=GpuFacts(),
                          device="cpu", max_iters=opts.pop("max_iters", 3), **opts)
    return summary, json.loads((tmp_path / "run" / "summary.json").read_text())


def test_unreachable_server_is_llm_error_with_its_cause(tmp_path):
    summary, data = run(closed_port_url(), tmp_path)
    assert summary.status == "llm_error", summary.stop_reason
    assert "Connection" in summary.stop_reason and "after 2 attempts" in summary.stop_reason
    assert data["candidates"] == 0 and data["iterations"] == 1  # one round, not the whole budget
    assert data["llm_failures"] and data["llm_failures"][0].startswith("coder: ")


@pytest.mark.parametrize("failure", ["429", "500", "garbage"])
def test_http_errors_and_garbage_bodies_are_llm_errors(oai_server, tmp_path, failure):
    for _ in range(2):
        if failure == "garbage":
            oai_server.push(raw=b"<html>this is not json</html>", status=200)
        else:
            oai_server.error(int(failure), f"server said {failure}")
    summary, data = run(oai_server.url, tmp_path)
    assert summary.status == "llm_error"
    expected = {"429": "HTTP 429", "500": "HTTP 500", "garbage": "after 2 attempts"}[failure]
    assert expected in summary.stop_reason, summary.stop_reason
    assert data["candidates"] == 0 and len(oai_server.requests) == 2


def test_replies_without_code_are_no_code(oai_server, tmp_path):
    oai_server.responder = lambda req: completion("I would write a kernel that fuses the softmax.")
    summary, data = run(oai_server.url, tmp_path, max_iters=2)
    assert summary.status == "no_code"
    assert "none of the Coder's 2 replies held a usable kernel" in summary.stop_reason
    assert "no fenced python code block" in summary.stop_reason
    assert data["candidates"] == 0 and data["replies_without_code"] == 2
    assert data["tokens"] > 0  # the replies were paid for, and counted


def test_minutes_budget_bounds_a_hanging_request(oai_server, tmp_path):
    """Against a server that never answers, a 3-second budget ends the run in seconds, not in
    max_attempts x the 60 s request timeout."""
    oai_server.responder = lambda req: (time.sleep(30), completion("late"))[1]
    slow = TransportSettings(timeout_s=60.0, max_attempts=4, backoff_base_s=0.01, backoff_max_s=0.02)
    t0 = time.monotonic()
    summary, _ = run(oai_server.url, tmp_path, budgets=Budgets(minutes=0.05), transport=slow,
                     budget_minutes=0.05)
    took = time.monotonic() - t0
    assert took < 15, f"the run took {took:.1f} s against a 3 s budget"
    assert summary.status == "budget" and "budget-minutes" in summary.stop_reason


def test_minutes_budget_bounds_a_trickling_server(oai_server, tmp_path):
    """Issue 25 item 12: a server sending 16 bytes a second never trips a per-read timeout; the whole
    request is bounded by the minutes left, so a 3-second budget ends the run in seconds, with its
    status and summary.json (before: 11 minutes past a 1-minute budget, no summary)."""
    from .helpers import GOOD_KERNEL, fenced

    big = completion(fenced(GOOD_KERNEL) + " " * 4000)  # ~6 KB at 16 B/s: over 6 minutes
    oai_server.responder = None
    for _ in range(4):
        oai_server.push(body=big, trickle_bps=16)
    slow = TransportSettings(timeout_s=60.0, max_attempts=4, backoff_base_s=0.01, backoff_max_s=0.02)
    t0 = time.monotonic()
    summary, data = run(oai_server.url, tmp_path, budgets=Budgets(minutes=0.05), transport=slow,
                        budget_minutes=0.05)
    took = time.monotonic() - t0
    assert took < 15, f"the run took {took:.1f} s against a 3 s budget"
    assert summary.status == "budget" and "budget-minutes" in summary.stop_reason, summary.stop_reason
    assert data["status"] == "budget"


def test_a_request_is_bounded_as_a_whole_not_per_read(oai_server):
    """Without a minutes budget, the request timeout bounds the whole request (16 B/s for a ~6 KB
    reply would take minutes; each read gets bytes well within the 2 s)."""
    from .helpers import GOOD_KERNEL, coder_task, fenced, local_roles

    oai_server.push(body=completion(fenced(GOOD_KERNEL) + " " * 4000), trickle_bps=16)
    quick = TransportSettings(timeout_s=2.0, max_attempts=1)
    t0 = time.monotonic()
    reply = local_roles(oai_server.url, transport=quick).coder.write(coder_task())
    took = time.monotonic() - t0
    assert took < 6, f"one 2 s request took {took:.1f} s"
    # the transport closes the reply at the deadline ("timed out"), or the wait gives up on it
    assert not reply.ok and reply.failure == "call" and "after 1 attempt" in reply.error, reply.error
    assert "timed out" in reply.error.lower() or "did not complete in 2 s" in reply.error, reply.error


@pytest.mark.slow
def test_console_names_the_cause(tmp_path):
    """`kiln run` prints the status and the cause; summary.json agrees."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "kiln.evals.cli", "run", str(PROBLEM), "--llm", "openai:local-model",
           "--base-url", hanging_up_url(), "--device", "cpu", "--out", str(out), "--quiet", "--max-iters", "3"]
    proc = subprocess.run(cmd, env={**os.environ}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "status: llm_error (the Coder's LLM call failed: coder (openai:local-model" in proc.stdout
    assert "Connection" in proc.stdout and "Traceback" not in proc.stderr
    assert json.loads((out / "summary.json").read_text())["candidates"] == 0


def test_a_runaway_reply_is_refused_and_kept_small(oai_server):
    """A 5 MB reply: refused with the reason, stored only as its head and tail."""
    from .helpers import GOOD_KERNEL, coder_task, fenced, local_roles

    oai_server.reply(fenced(GOOD_KERNEL) + "x" * 5_000_000)
    reply = local_roles(oai_server.url).coder.write(coder_task())
    assert not reply.ok and reply.failure == "reply" and reply.source is None
    assert "over kiln's cap of 128000" in reply.error and len(reply.raw) < 130_000
    assert "characters cut" in reply.raw


def test_the_proposer_is_told_what_a_case_costs():
    """Issue 25 items 4 and 5: the calls per case and the seconds per call come from the check's own
    record (one source, per call not per trial), and the Proposer hears how its cases are run."""
    from kiln.agents.checkcost import CheckBudget, check_cost
    from kiln.agents.proposer import LLMProposer
    from kiln.tools.records import CaseSummary, CheckRecord, CorrectnessRecord, TrialRecord

    from .helpers import proposer_input

    rows = [TrialRecord(case="problem", distribution="x1", trial=i // 2, passed=True, candidate_s=0.25,
                        phase="first_call" if i % 2 == 0 else "second_call") for i in range(52)]
    summary = {"problem": CaseSummary(n_trials=26, n_passed=26, candidate_s=13.0, reference_s=3.38)}  # both calls
    rec = CheckRecord(problem="p.py", candidate="c.py", status="ok", correct=True,
                      correctness=CorrectnessRecord(atol=1e-4, rtol=1e-4, n_trials=52, n_passed=52, trials=rows,
                                                    n_planned=52, cases=summary, passed=True))
    inp = proposer_input(device="cpu", cost=check_cost(rec, budget_s=90.0),
                         budget=CheckBudget(correctness_s=90.0, calls_per_case=52))
    system, user = (m.content for m in LLMProposer(None).messages(inp))
    assert "runs under the Triton interpreter on the CPU" in user
    assert "a check plans 52 candidate calls per case" in user and "correctness stage of 90 s" in user
    assert "problem: 52 of 52 calls done, 52 passed, 0.25 s per candidate call (reference 0.13 s per trial" in user
    assert "0.50 s per candidate call" not in user  # a trial's two calls are not one call
    assert "about 59 s are left for new cases; a case of the\n  problem's own sizes costs about 13 s" in user
    assert "first timed with one trial" in user
    assert "under a few seconds on a CPU" not in system
    for words in ("inputs scaled x3", "inputs negated", "heavy-tailed", "constructor arguments", "negative_slope"):
        assert words in system, words
