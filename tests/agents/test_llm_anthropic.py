"""The Anthropic backend (optional extra) through the real langchain-anthropic client and a local
server speaking the Messages API: text replies, tool-calling structured output, 529 retries."""

from __future__ import annotations

import pytest

from .helpers import FAST, GOOD_KERNEL, coder_task, fenced, judge_input
from .test_llm_server import VERDICT

pytest.importorskip("langchain_anthropic")

KEY = "sk-ant-test-0123456789abcdefghij"


def message(content: list[dict], tokens: tuple[int, int] = (1000, 100)) -> dict:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": content, "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]}}


@pytest.fixture
def roles(oai_server, monkeypatch):
    from kiln.agents.registry import resolve_roles

    monkeypatch.setenv("ANTHROPIC_BASE_URL", oai_server.url.removesuffix("/v1"))  # the SDK's own variable
    return resolve_roles("anthropic:claude-sonnet-4-5", env={"ANTHROPIC_API_KEY": KEY}, transport=FAST)


def test_anthropic_text_and_tool_calling(oai_server, roles):
    oai_server.push(body=message([{"type": "text", "text": fenced(GOOD_KERNEL)}]))
    oai_server.push(body=message([{"type": "tool_use", "id": "toolu_1", "name": "JudgeVerdict", "input": VERDICT}]))
    reply = roles.coder.write(coder_task())
    assert reply.ok and reply.source == GOOD_KERNEL
    assert reply.usage.cost_usd == pytest.approx((1000 * 3 + 100 * 15) / 1e6)
    decision = roles.judge.decide(judge_input(correct=False))
    assert decision.next == "repair" and decision.plan == VERDICT["plan"]
    req = oai_server.requests[1]
    assert req["path"] == "/v1/messages" and req["json"]["tools"][0]["name"] == "JudgeVerdict"
    assert req["json"]["tool_choice"]["name"] == "JudgeVerdict"


def test_anthropic_overloaded_is_retried(oai_server, roles):
    oai_server.push(status=529, body={"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})
    oai_server.push(body=message([{"type": "text", "text": fenced(GOOD_KERNEL)}]))
    assert roles.coder.write(coder_task()).ok and len(oai_server.requests) == 2
