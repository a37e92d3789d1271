"""Prompts are ordered for providers' prefix caches: every role's request opens with what is the same
in every call of a run (the system prompt, then the problem), and Anthropic requests mark both ends
with cache breakpoints. OpenAI-compatible servers get plain strings and no kiln-internal keys."""

from __future__ import annotations

import json

import pytest

from .conftest import completion
from .helpers import GOOD_KERNEL, coder_task, fenced, judge_input, local_roles, proposer_input
from .test_llm_anthropic import KEY, message


def test_openai_requests_share_their_prefix_and_carry_no_internal_keys(oai_server):
    oai_server.responder = lambda req: completion(fenced(GOOD_KERNEL))
    roles = local_roles(oai_server.url)
    roles.coder.write(coder_task("generate"))
    roles.coder.write(coder_task("repair", best_src=GOOD_KERNEL, last_src="x = 1\n", feedback="IndexError"))
    first, second = (r["json"]["messages"] for r in oai_server.requests)
    assert first[0] == second[0]  # the system prompt, unchanged
    problem = first[1]["content"].split("```\n\n")[0]
    assert problem.startswith("Problem `softmax`") and second[1]["content"].startswith(problem)
    raw = json.dumps(oai_server.requests[0]["json"])
    assert "kiln_cache_prefix" not in raw and "cache_control" not in raw
    assert all(isinstance(m["content"], str) for m in first)


def test_judge_and_proposer_open_with_the_problem(oai_server):
    from kiln.agents.judge import LLMJudge
    from kiln.agents.proposer import LLMProposer

    judge_user = LLMJudge(None).messages(judge_input(correct=False, iteration=7))[1].content
    proposer_user = LLMProposer(None).messages(proposer_input())[1].content
    for text in (judge_user, proposer_user):
        assert text.startswith("Problem `softmax`:\n```python\n")
    assert "Iteration 7" not in judge_user[:200] and "Progress (iteration 7)" in judge_user  # the counter is late


def test_anthropic_requests_mark_cache_breakpoints(oai_server, monkeypatch):
    pytest.importorskip("langchain_anthropic")
    from kiln.agents.registry import resolve_roles

    from .helpers import FAST

    monkeypatch.setenv("ANTHROPIC_BASE_URL", oai_server.url.removesuffix("/v1"))
    roles = resolve_roles("anthropic:claude-sonnet-4-5", env={"ANTHROPIC_API_KEY": KEY}, transport=FAST)
    oai_server.push(body=message([{"type": "text", "text": fenced(GOOD_KERNEL)}]))
    assert roles.coder.write(coder_task("generate")).ok
    body = oai_server.requests[0]["json"]
    system = body["system"]
    assert isinstance(system, list) and system[-1]["cache_control"] == {"type": "ephemeral"}
    first, rest = body["messages"][0]["content"]
    assert first["cache_control"] == {"type": "ephemeral"} and first["text"].startswith("Problem `softmax`")
    assert "cache_control" not in rest and "Write a first correct" in rest["text"]
    assert "kiln_cache_prefix" not in json.dumps(body)
