"""A kernel with a path per device (issue 25 item 6): its device queries are found by AST, and a CPU
run that verified only the CPU branch says so in the candidate record, the summary and the status
(`solved_cpu_only`), never a plain `solved`."""

from __future__ import annotations

import json

from graph_helpers import judge, kernel, reply, roles, run

from kiln.agents.devicepath import device_queries
from kiln.agents.facts import candidate_facts


def test_device_queries_are_found_wherever_they_are_asked():
    src = '''
import os, torch
DEVICE = "cuda"
def f(x, y):
    a = 64 if x.is_cuda else 8
    if x.device.type == "cuda":
        pass
    if torch.cuda.is_available():
        pass
    if DEVICE != "cpu":
        pass
    if x.device == torch.device("cuda"):
        pass
    interp = os.environ.get("TRITON_INTERPRET")
    cfg(y.shape[0], y.is_cuda)
    return torch.empty(4, device=x.device).to(y.device)
'''
    found = device_queries(src)
    assert [q.split(":")[0] for q in found] == [f"line {n}" for n in (5, 6, 8, 10, 12, 14, 15)], found
    assert "`x.is_cuda`" in found[0] and "`y.is_cuda`" in found[-1]
    assert device_queries("y = torch.empty(4, device=x.device).to(y.device)\nz = x.cuda()") == []
    assert device_queries(kernel("good")) == []
    assert any("it asks which device it runs on (line 30: `x.is_cuda`)" in f for f in candidate_facts(kernel("device_branch")))


def test_a_cpu_run_of_a_device_branching_kernel_is_not_plainly_solved(tmp_path):
    r = roles([reply("device_branch")], [judge("stop")], [{"cases": []}])
    summary = run(tmp_path, r, max_iters=2)
    assert summary.status == "solved_cpu_only", (summary.status, summary.stop_reason)
    assert "verified: CPU branch only; the CUDA branch never ran" in summary.stop_reason
    assert summary.best.correct and summary.best.verified.startswith("CPU branch only; the CUDA branch never ran")
    data = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert data["status"] == "solved_cpu_only" and "line 30: `x.is_cuda`" in data["best"]["verified"]
    rewards = [json.loads(line) for line in (tmp_path / "run" / "rewards.jsonl").read_text().splitlines()]
    assert rewards[0]["candidate"] == "c0001" and rewards[0]["verified"].startswith("CPU branch only")


def test_a_kernel_with_one_path_is_solved(tmp_path):
    summary = run(tmp_path, roles([reply("good")], [judge("stop")], [{"cases": []}]), max_iters=2)
    assert summary.status == "solved" and summary.best.verified is None
