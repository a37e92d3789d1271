"""Proposer cases: screened statically by the Proposer; the reference itself runs in a clean
subprocess (`casecheck`), once, where the cases are validated (issue 27)."""

from __future__ import annotations

from kiln.agents.casecheck import runtime_error, static_problem_error
from kiln.agents.facts import candidate_facts
from kiln.agents.llm.client import LLMClient
from kiln.agents.llm.redact import Redactor
from kiln.agents.llm.scripted import ScriptedChatModel
from kiln.agents.llm.usage import UsageTracker
from kiln.agents.proposer import LLMProposer

from .helpers import PROBLEM, case_source, proposer_input


def proposer(cases: list[dict], **kw) -> LLMProposer:
    model = ScriptedChatModel(replies=[{"structured": {"cases": cases}}])
    client = LLMClient("proposer", model, model_name="scripted", tracker=UsageTracker(), redactor=Redactor())
    return LLMProposer(client, **kw)


def test_good_cases_kept_bad_ones_rejected_with_reasons():
    cases = [
        {"name": "batch1_1025", "source": case_source("return [torch.rand(1, 1025)]"), "rationale": "edge"},
        {"name": "batch1_1025", "source": case_source("return [torch.rand(2, 7)]"), "rationale": "dup"},
        {"name": "held", "source": case_source("return [torch.rand(2, 9)]"), "rationale": "already held"},
        {"name": "broken", "source": case_source("return [torch.rand(3)]"), "rationale": "1-D: softmax dim=1 fails"},
        {"name": "nomodel", "source": "def get_inputs():\n    return []\n", "rationale": "x"},
        {"name": "!!!", "source": case_source(), "rationale": "x"},
    ]
    reply = proposer(cases).propose(proposer_input(existing_cases=["held"], max_cases=4))
    assert [c.name for c in reply.cases] == ["batch1_1025", "broken"]  # its reference runs where it is validated
    why = "\n".join(reply.rejected)
    for text in ("duplicate name", "missing Model", "no usable name"):
        assert text in why
    assert "the reference fails on it" in runtime_error(reply.cases[1].source)
    assert reply.error is None and reply.usage.role == "proposer"


def test_max_cases_and_all_rejected_error():
    many = [{"name": f"c{i}", "source": case_source(f"return [torch.rand(1, {1000 + i})]"), "rationale": ""}
            for i in range(3)]
    reply = proposer(many).propose(proposer_input(max_cases=2))
    assert len(reply.cases) == 2 and "over the limit of 2" in reply.rejected[0]
    reply = proposer([{"name": "x", "source": "syntax error(", "rationale": ""}]).propose(proposer_input())
    assert reply.cases == [] and reply.error == "no usable case (1 rejected)"


def test_static_check_requires_the_model_verbatim():
    assert static_problem_error(case_source(), PROBLEM) is None
    changed = case_source().replace("dim=1", "dim=-1")
    assert "differs" in static_problem_error(changed, PROBLEM)
    assert "syntax error at line 1" in static_problem_error("def (", PROBLEM)


def test_slow_case_rejected_and_env_is_clean(monkeypatch):
    slow = case_source("import time; time.sleep(30); return [torch.rand(1, 4)]")
    assert "too slow" in runtime_error(slow, timeout_s=3)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-should-not-be-seen-000000")
    spy = case_source("import os; assert 'OPENAI_API_KEY' not in os.environ; return [torch.rand(1, 4)]")
    assert runtime_error(spy) is None


def test_candidate_facts_read_masks_and_tiles():
    src = ("BLOCK_SIZE = 128\noffs = tl.arange(0, BLOCK_SIZE)\nx = tl.load(p + offs)\ny = tl.load(q + offs, mask=m)\n"
           "CUDA = \"__shared__ float tile[256]; int idx = blockIdx.x * blockDim.x;\"\n")
    facts = "\n".join(candidate_facts(src))
    assert "BLOCK_SIZE = 128" in facts and "129" in facts and "1 of 2 tl.load/tl.store calls have no mask" in facts
    assert "256 elements" in facts and "32-bit indices" in facts and "no .contiguous()" in facts
