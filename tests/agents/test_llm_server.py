"""The LLM roles through the real langchain-openai client against a local OpenAI-compatible server."""

from __future__ import annotations

from kiln.agents.llm.transport import TransportSettings

from .helpers import FAST, GOOD_KERNEL, coder_task, fenced, judge_input, local_roles, proposer_input

VERDICT = {
    "mode": "correction", "diagnosis": "the last column is dropped", "bottleneck": None,
    "evidence": ["out[0, 999] expected 0.1 got 0.3"], "plan": "mask with cols < n_cols",
    "next": "repair", "stop_reason": None,
}


def test_coder_normal_reply(oai_server):
    oai_server.reply(fenced(GOOD_KERNEL), tokens=(1200, 300))
    roles = local_roles(oai_server.url)
    reply = roles.coder.write(coder_task())
    assert reply.ok and reply.source == GOOD_KERNEL
    assert reply.usage.input_tokens == 1200 and reply.usage.output_tokens == 300
    assert reply.notes.startswith("Here is the kernel")
    req = oai_server.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["json"]["model"] == "local-model"
    assert req["headers"]["authorization"] == "Bearer EMPTY"  # no key in the env: "EMPTY"
    assert "class Model(nn.Module)" in oai_server.user_text()


def test_retry_on_429_then_success(oai_server):
    oai_server.error(429, "slow down", headers={"retry-after": "0"})
    oai_server.reply(fenced(GOOD_KERNEL))
    reply = local_roles(oai_server.url).coder.write(coder_task())
    assert reply.ok and len(oai_server.requests) == 2


def test_retry_on_500_then_success(oai_server):
    oai_server.error(500)
    oai_server.error(503)
    oai_server.reply(fenced(GOOD_KERNEL))
    roles = local_roles(oai_server.url)
    assert roles.coder.write(coder_task()).ok and len(oai_server.requests) == 3
    assert roles.tracker.summary().total.failed_calls == 0


def test_persistent_500_fails_clearly(oai_server):
    for _ in range(3):
        oai_server.error(500, "internal meltdown")
    roles = local_roles(oai_server.url)
    reply = roles.coder.write(coder_task())
    assert not reply.ok and reply.source is None
    assert "after 3 attempts" in reply.error and "HTTP 500" in reply.error and "internal meltdown" in reply.error
    assert reply.error.startswith(f"coder (openai:local-model @ {oai_server.url})")
    assert len(oai_server.requests) == 3
    assert roles.tracker.summary().by_role["coder"].failed_calls == 1


def test_timeout_retried_then_success(oai_server):
    oai_server.push(delay=1.5, body={})
    oai_server.reply(fenced(GOOD_KERNEL))
    fast = TransportSettings(timeout_s=0.5, max_attempts=2, backoff_base_s=0.01)
    reply = local_roles(oai_server.url, transport=fast).coder.write(coder_task())
    assert reply.ok and len(oai_server.requests) == 2


def test_timeout_every_time_fails_clearly(oai_server):
    oai_server.push(delay=1.0, body={})
    oai_server.push(delay=1.0, body={})
    fast = TransportSettings(timeout_s=0.3, max_attempts=2, backoff_base_s=0.01)
    reply = local_roles(oai_server.url, transport=fast).coder.write(coder_task())
    assert not reply.ok and "timed out" in reply.error.lower() and "after 2 attempts" in reply.error


def test_auth_error_is_not_retried(oai_server):
    oai_server.error(401, "bad key")
    reply = local_roles(oai_server.url).coder.write(coder_task())
    assert not reply.ok and "HTTP 401" in reply.error and "not retryable" in reply.error
    assert len(oai_server.requests) == 1


def test_malformed_body_retried_then_clear_error(oai_server):
    oai_server.push(raw=b"{not json")
    oai_server.reply(fenced(GOOD_KERNEL))
    assert local_roles(oai_server.url).coder.write(coder_task()).ok
    oai_server.push(raw=b"{not json")
    oai_server.push(raw=b"<html>gateway</html>")
    oai_server.push(raw=b"{not json")
    reply = local_roles(oai_server.url).coder.write(coder_task())
    assert not reply.ok and "malformed response body" in reply.error


def test_reply_without_code_is_a_recorded_failure_with_usage(oai_server):
    oai_server.reply("I would use a Triton kernel with a masked load.", tokens=(900, 40))
    roles = local_roles(oai_server.url)
    reply = roles.coder.write(coder_task())
    assert not reply.ok and "no fenced python code block" in reply.error
    assert reply.raw.startswith("I would use")
    assert roles.tracker.summary().total.output_tokens == 40  # it still counts against the budget


def test_several_ambiguous_blocks_rejected(oai_server):
    oai_server.reply(fenced(GOOD_KERNEL) + "\nOr faster:\n" + fenced(GOOD_KERNEL.replace("4 if", "8 if")))
    reply = local_roles(oai_server.url).coder.write(coder_task())
    assert not reply.ok and "ambiguous" in reply.error and "2 python code blocks" in reply.error


def test_judge_structured_output_json_schema(oai_server):
    oai_server.reply_json(VERDICT)
    decision = local_roles(oai_server.url).judge.decide(judge_input(correct=False))
    assert decision.next == "repair" and decision.mode == "correction"
    assert decision.plan == "mask with cols < n_cols" and decision.error is None
    fmt = oai_server.requests[0]["json"]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "JudgeVerdict"


def test_judge_malformed_json_retried_once_with_the_error(oai_server):
    oai_server.reply('{"mode": "correction", "diagnosis": "x"')  # truncated JSON
    oai_server.reply_json(VERDICT)
    decision = local_roles(oai_server.url).judge.decide(judge_input(correct=False))
    assert decision.next == "repair" and decision.error is None
    retry_prompt = oai_server.user_text(1)
    assert "could not be used" in retry_prompt and '"diagnosis": "x"' in retry_prompt
    assert decision.usage.input_tokens == 200  # both attempts counted


def test_judge_twice_malformed_becomes_data(oai_server):
    oai_server.reply("not json at all")
    oai_server.reply_json({"mode": "correction"})  # missing fields
    decision = local_roles(oai_server.url).judge.decide(judge_input(correct=False))
    assert decision.error and "unusable judge reply" in decision.error
    assert decision.next == "repair" and "expected 0.1, got 0.3" in decision.diagnosis


def test_judge_function_calling_method(oai_server):
    oai_server.push(body=_tool_completion(VERDICT))
    roles = local_roles(oai_server.url, structured="function_calling")
    decision = roles.judge.decide(judge_input(correct=False))
    assert decision.next == "repair"
    assert oai_server.requests[0]["json"]["tools"][0]["function"]["name"] == "JudgeVerdict"


def test_proposer_structured_output(oai_server):
    from .helpers import case_source

    good = case_source("return [torch.rand(1, 1025)]")
    bad = case_source().replace("torch.softmax(x, dim=1)", "torch.softmax(x, dim=0)")
    oai_server.reply_json({"cases": [
        {"name": "Tile Edge 1025", "source": good, "rationale": "one past the block"},
        {"name": "changed_model", "source": bad, "rationale": "sneaky"},
    ]})
    reply = local_roles(oai_server.url).proposer.propose(proposer_input(max_cases=3))
    assert [c.name for c in reply.cases] == ["tile_edge_1025"]
    assert reply.rejected and "differs from the problem's Model" in reply.rejected[0]
    assert "ProposedCases" in oai_server.requests[0]["json"]["response_format"]["json_schema"]["name"]
    assert "next power of two" in oai_server.user_text()  # the candidate's assumptions were read


def _tool_completion(args: dict) -> dict:
    from .conftest import completion

    return completion(None, tool_args=args, tool_name="JudgeVerdict")


def test_rate_limit_spaces_requests(oai_server):
    import time

    for _ in range(3):
        oai_server.reply(fenced(GOOD_KERNEL))
    settings = FAST.model_copy(update={"requests_per_second": 10.0})
    coder = local_roles(oai_server.url, transport=settings).coder
    t0 = time.monotonic()
    for _ in range(3):
        assert coder.write(coder_task()).ok
    assert time.monotonic() - t0 >= 0.15  # 3 requests at 10/s: at least two gaps of ~0.1 s


def test_judge_json_mode_for_servers_without_json_schema(oai_server):
    oai_server.reply_json(VERDICT)
    decision = local_roles(oai_server.url, structured="json_mode").judge.decide(judge_input(correct=False))
    assert decision.next == "repair" and decision.error is None
    req = oai_server.requests[0]["json"]
    assert req["response_format"] == {"type": "json_object"}
    assert "json" in oai_server.user_text(0).lower()  # json_mode needs the word in the prompt
