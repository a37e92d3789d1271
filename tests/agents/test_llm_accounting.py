"""Usage and cost, budgets, the response cache and secret redaction, end to end over HTTP."""

from __future__ import annotations

import json
import sqlite3

from kiln.agents.llm.usage import Budgets, UsageTracker, cost_usd, known_price

from .helpers import GOOD_KERNEL, coder_task, fenced, judge_input, local_roles
from .test_llm_server import VERDICT

PLANTED = "sk-test-PLANTEDKEY0123456789abcdef"


def test_usage_per_role_and_cost_for_a_priced_model(oai_server):
    oai_server.reply(fenced(GOOD_KERNEL), tokens=(1_000_000, 100_000), model="gpt-4.1")
    oai_server.reply_json(VERDICT, tokens=(2000, 100), model="gpt-4.1")
    roles = local_roles(oai_server.url, model="gpt-4.1")
    reply = roles.coder.write(coder_task())
    assert reply.usage.cost_usd == 2.0 + 0.8  # $2/M in, $8/M out
    roles.judge.decide(judge_input(correct=False))
    s = roles.tracker.summary()
    assert s.by_role["coder"].calls == 1 and s.by_role["judge"].calls == 1
    assert s.by_role["judge"].input_tokens == 2000
    assert abs(s.total.cost_usd - (2.8 + 0.004 + 0.0008)) < 1e-9
    assert [c.role for c in s.calls] == ["coder", "judge"] and s.unpriced_models == []


def test_unknown_model_counts_tokens_only(oai_server):
    oai_server.reply(fenced(GOOD_KERNEL), tokens=(500, 50))
    roles = local_roles(oai_server.url, model="my-local-qwen")
    assert roles.coder.write(coder_task()).usage.cost_usd is None
    s = roles.tracker.summary()
    assert s.total.input_tokens == 500 and s.total.cost_usd is None and s.unpriced_models == ["my-local-qwen"]


def test_price_lookup_handles_snapshots_only():
    assert known_price("gpt-4o-2024-08-06") == known_price("gpt-4o")
    assert known_price("claude-sonnet-4-20250514") == known_price("claude-sonnet-4")
    assert known_price("gpt-4o-mini") != known_price("gpt-4o")
    assert known_price("gpt-4o-turbo-custom") is None
    assert cost_usd("nobody-knows", 10, 10) is None


def test_cache_hit_reproduces_without_a_request(oai_server, tmp_path):
    cache = tmp_path / "llm.sqlite"
    oai_server.reply(fenced(GOOD_KERNEL), tokens=(700, 70))
    oai_server.reply_json(VERDICT)
    first = local_roles(oai_server.url, cache_path=cache)
    a = first.coder.write(coder_task())
    da = first.judge.decide(judge_input(correct=False))
    assert len(oai_server.requests) == 2
    # a rerun with another timeout (transport settings are not part of the key) hits the cache
    from .helpers import FAST

    second = local_roles(oai_server.url, cache_path=cache, transport=FAST.model_copy(update={"timeout_s": 9.0}))
    b = second.coder.write(coder_task())
    db = second.judge.decide(judge_input(correct=False))
    assert len(oai_server.requests) == 2  # nothing new went over the wire
    assert b.source == a.source and b.raw == a.raw and db.plan == da.plan
    assert b.usage.cached and b.usage.input_tokens == 700
    s = second.tracker.summary()
    assert s.total.cached_calls == 2
    # a different task is a different key
    oai_server.reply(fenced(GOOD_KERNEL))
    second.coder.write(coder_task(mode="repair", feedback="compile error at line 3"))
    assert len(oai_server.requests) == 3


def test_token_budget_stops_further_calls(oai_server):
    oai_server.reply(fenced(GOOD_KERNEL), tokens=(900, 200))
    roles = local_roles(oai_server.url, budgets=Budgets(tokens=1000))
    assert roles.coder.write(coder_task()).ok
    assert roles.tracker.exhausted() == "budget-tokens spent: 1100 of 1000 tokens"
    reply = roles.coder.write(coder_task())
    assert not reply.ok and "budget-tokens spent" in reply.error
    decision = roles.judge.decide(judge_input(correct=False))
    assert decision.next == "stop" and "budget" in decision.stop_reason
    assert len(oai_server.requests) == 1  # no request after the budget was spent


def test_usd_budget(oai_server):
    oai_server.reply(fenced(GOOD_KERNEL), tokens=(100_000, 10_000))
    roles = local_roles(oai_server.url, model="gpt-4o", budgets=Budgets(usd=0.30))
    roles.coder.write(coder_task())  # $0.25 + $0.10
    assert roles.tracker.exhausted().startswith("budget-usd spent")


def test_usd_budget_needs_a_priced_model(oai_server):
    import pytest

    from kiln.tools.errors import KilnConfigError

    with pytest.raises(KilnConfigError, match="no price known for my-model"):
        local_roles(oai_server.url, model="my-model", budgets=Budgets(usd=1.0))


def test_minutes_budget_and_restore():
    now = [0.0]
    tracker = UsageTracker(Budgets(minutes=2.0), clock=lambda: now[0])
    assert tracker.exhausted() is None
    now[0] = 90.0
    resumed = UsageTracker(Budgets(minutes=2.0), clock=lambda: now[0])
    resumed.restore(tracker.summary())  # 90 s already spent before the restart
    now[0] = 121.0  # 31 s more
    assert resumed.exhausted() is not None and tracker.exhausted() is not None
    assert UsageTracker(Budgets(minutes=2.0), clock=lambda: now[0]).exhausted() is None


def test_api_key_never_leaks(oai_server, tmp_path, caplog):
    import logging

    caplog.set_level(logging.DEBUG)
    env = {"OPENAI_API_KEY": PLANTED}
    oai_server.error(401, f"Incorrect API key provided: {PLANTED}")  # servers do echo keys
    oai_server.reply(f"Sure. Your key is {PLANTED}.\n" + fenced(GOOD_KERNEL))
    roles = local_roles(oai_server.url, env=env, cache_path=tmp_path / "c.sqlite")
    failed = roles.coder.write(coder_task())
    ok = roles.coder.write(coder_task())
    assert oai_server.requests[0]["headers"]["authorization"] == f"Bearer {PLANTED}"  # it was used
    blobs = [failed.model_dump_json(), ok.model_dump_json(), roles.tracker.summary().model_dump_json(),
             json.dumps(roles.specs), caplog.text]
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        blobs += [row[0] for row in db.execute("SELECT value FROM llm_cache")]
    blobs.append((tmp_path / "c.sqlite").read_bytes().decode("latin-1"))
    for blob in blobs:
        assert PLANTED not in blob
    assert "[REDACTED]" in failed.error and "[REDACTED]" in ok.raw
