"""`--llm` resolution: providers by name, per-role overrides, clear start-up errors, no fallback."""

from __future__ import annotations

import importlib.util
import json

import pytest

from kiln.agents.coder import LLMCoder
from kiln.agents.judge import LLMJudge
from kiln.agents.llm.backends import parse_spec, structured_method
from kiln.agents.llm.usage import Budgets
from kiln.agents.proposer import LLMProposer
from kiln.agents.registry import resolve_roles
from kiln.tools.errors import KilnConfigError

from .helpers import GOOD_KERNEL, coder_task, fenced, judge_input

KEY = "sk-test-registry-000000000000000"


def test_unknown_provider_lists_valid_names():
    with pytest.raises(KilnConfigError, match="valid providers: anthropic, builtin, openai, scripted"):
        resolve_roles("gemini:pro", env={})


def test_missing_key_fails_at_start_and_never_falls_back():
    with pytest.raises(KilnConfigError, match="OPENAI_API_KEY"):
        resolve_roles("openai:gpt-4.1", env={"ANTHROPIC_API_KEY": "sk-ant-0123456789"})
    with pytest.raises(KilnConfigError, match="ANTHROPIC_API_KEY"):
        resolve_roles("anthropic:claude-sonnet-4-5", env={"OPENAI_API_KEY": KEY})


def test_anthropic_backend():
    env = {"ANTHROPIC_API_KEY": "sk-ant-test-00000000000000"}
    if importlib.util.find_spec("langchain_anthropic") is None:
        with pytest.raises(KilnConfigError, match=r"pip install 'kernelkiln\[anthropic\]'"):
            resolve_roles("anthropic:claude-sonnet-4-5", env=env)
    else:
        roles = resolve_roles("anthropic:claude-sonnet-4-5", env=env)
        assert roles.judge.client.method == "function_calling"


def test_spec_parsing_errors():
    with pytest.raises(KilnConfigError, match="needs a model"):
        parse_spec("openai")
    with pytest.raises(KilnConfigError, match="takes no model"):
        parse_spec("builtin:foo")
    with pytest.raises(KilnConfigError, match="--base-url is for OpenAI-compatible"):
        parse_spec("anthropic:claude", base_url="http://x")
    with pytest.raises(KilnConfigError, match="needs an OpenAI-compatible spec"):
        resolve_roles("builtin", base_url="http://127.0.0.1:1/v1", env={})
    with pytest.raises(KilnConfigError, match="not an http\\(s\\) URL"):
        resolve_roles("openai:m", base_url="localhost:8000", env={})
    with pytest.raises(KilnConfigError, match="unknown --lang"):
        resolve_roles("openai:m", base_url="http://127.0.0.1:1/v1", lang="rust", env={})


def test_structured_method_per_backend():
    assert structured_method(parse_spec("openai:gpt-4.1")) == "json_schema"
    assert structured_method(parse_spec("anthropic:claude-sonnet-4-5")) == "function_calling"
    assert structured_method(parse_spec("openai:q", base_url="http://x"), "function_calling") == "function_calling"
    with pytest.raises(KilnConfigError, match="unknown structured-output method"):
        structured_method(parse_spec("openai:q"), "xml")


def test_per_role_overrides_and_hosted_key(oai_server):
    roles = resolve_roles("openai:gpt-4.1", judge="openai:gpt-4.1-mini", base_url=oai_server.url,
                          env={"OPENAI_API_KEY": KEY})
    assert isinstance(roles.coder, LLMCoder) and isinstance(roles.judge, LLMJudge)
    assert isinstance(roles.proposer, LLMProposer)
    assert roles.coder.client.model_name == "gpt-4.1" and roles.judge.client.model_name == "gpt-4.1-mini"
    assert roles.specs["judge"].startswith("openai:gpt-4.1-mini")
    oai_server.reply(fenced(GOOD_KERNEL))
    roles.coder.write(coder_task())
    assert oai_server.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"


def test_builtin_is_the_default_and_is_imported_lazily():
    has_builtin = importlib.util.find_spec("kiln.agents.builtin") is not None
    try:
        import kiln.agents.builtin as builtin

        ready = all(hasattr(builtin, n) for n in ("BuiltinCoder", "BuiltinJudge", "BuiltinProposer"))
    except ImportError:
        ready = False
    if has_builtin and ready:
        roles = resolve_roles(None, env={})
        assert type(roles.coder).__name__ == "BuiltinCoder" and roles.chat_models == {}
        assert set(roles.specs.values()) == {"builtin"}
    else:
        with pytest.raises(KilnConfigError, match="built-in"):
            resolve_roles(None, env={})


def test_scripted_backend_from_a_file(tmp_path):
    verdict = {"mode": "correction", "diagnosis": "d", "bottleneck": None, "evidence": [], "plan": "p",
               "next": "repair", "stop_reason": None}
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"model": "gpt-4.1", "coder": [fenced(GOOD_KERNEL)],
                                  "judge": [{"structured": verdict}], "proposer": []}))
    roles = resolve_roles(f"scripted:{script}", env={}, budgets=Budgets(usd=5.0))  # priced via "model"
    assert roles.coder.write(coder_task()).ok
    decision = roles.judge.decide(judge_input(correct=False))
    assert decision.next == "repair" and decision.plan == "p"
    assert roles.tracker.summary().total.calls == 2 and roles.tracker.summary().total.cost_usd > 0
    with pytest.raises(KilnConfigError, match="cannot read LLM script"):
        resolve_roles(f"scripted:{tmp_path / 'missing.json'}", env={})
