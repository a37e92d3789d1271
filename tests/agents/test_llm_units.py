"""Transport classification, redaction, the scripted model and GPU facts (no server needed)."""

from __future__ import annotations

import json
import logging

import pytest

from kiln.agents.gpufacts import probe_device, read_gpu_facts
from kiln.agents.llm.cache import cache_key
from kiln.agents.llm.redact import MASK, Redactor, install_log_redaction
from kiln.agents.llm.scripted import ScriptedChatModel, ScriptedTransportError
from kiln.agents.llm.transport import (
    LLMCallError,
    TransportSettings,
    backoff_s,
    call_with_retries,
    is_retryable,
)


class StatusError(Exception):
    def __init__(self, code: int, retry_after: str | None = None) -> None:
        super().__init__(f"status {code}")
        self.status_code = code
        self.response = type("R", (), {"headers": {"retry-after": retry_after} if retry_after else {}})()


def test_retryable_classification():
    assert all(is_retryable(StatusError(c)) for c in (429, 500, 502, 503, 529))
    assert not any(is_retryable(StatusError(c)) for c in (400, 401, 403, 404, 422))
    assert is_retryable(TimeoutError()) and is_retryable(json.JSONDecodeError("x", "y", 0))
    assert not is_retryable(ValueError("bad schema"))


def test_backoff_grows_is_capped_and_honours_retry_after():
    s = TransportSettings(backoff_base_s=1.0, backoff_max_s=5.0)
    waits = [backoff_s(a, s, StatusError(500)) for a in (1, 2, 3, 4, 5)]
    assert 1.0 <= waits[0] <= 1.25 and 2.0 <= waits[1] <= 2.5 and waits[4] == 5.0
    assert backoff_s(1, s, StatusError(429, "3")) == 3.0
    assert backoff_s(1, s, StatusError(429, "600")) == 5.0


def test_call_with_retries_counts_attempts_and_sleeps():
    calls, sleeps = [], []

    def flaky(timeout_s):
        calls.append(timeout_s)
        if len(calls) < 3:
            raise StatusError(503)
        return "ok"

    s = TransportSettings(max_attempts=3, backoff_base_s=0.5)
    assert call_with_retries(flaky, s, sleep=sleeps.append) == "ok" and len(sleeps) == 2
    with pytest.raises(LLMCallError, match="after 1 attempt \\(not retryable\\): HTTP 400"):
        call_with_retries(lambda t: (_ for _ in ()).throw(StatusError(400)), s, sleep=sleeps.append)


def test_an_attempt_is_bounded_as_a_whole_even_when_nothing_reads_a_socket():
    """A call that never returns (a server trickling its headers, a stuck SDK) is abandoned at its
    limit: the attempt's timeout, or the minutes left, whichever is smaller."""
    import time

    s = TransportSettings(timeout_s=0.4, max_attempts=1)
    t0 = time.monotonic()
    with pytest.raises(LLMCallError, match="did not complete in 0 s"):
        call_with_retries(lambda t: time.sleep(30), s, sleep=lambda w: None)
    assert time.monotonic() - t0 < 2.0
    left = iter([0.8, 0.8])  # a minutes budget with 0.8 s left: it bounds the attempt, not the 60 s timeout
    t0 = time.monotonic()
    with pytest.raises(LLMCallError, match="did not complete in 1 s"):
        call_with_retries(lambda t: time.sleep(30), TransportSettings(timeout_s=60, max_attempts=1),
                          sleep=lambda w: None, seconds_left=lambda: next(left))
    assert time.monotonic() - t0 < 2.5


def test_redactor_masks_known_values_and_key_shapes():
    env = {"HF_TOKEN": "hf_abcdefghijk", "HOME": "/root", "X_KEY": "EMPTY", "TOKENIZERS_PARALLELISM": "false"}
    r = Redactor(["my-private-token-123"], env=env)
    text = r("a my-private-token-123 b hf_abcdefghijk c sk-proj-ABCDEFGHIJKLMNOPQRSTUV d Bearer abc.def.ghi123 /root EMPTY")
    assert "my-private-token" not in text and "hf_abc" not in text and "sk-proj" not in text
    assert "abc.def" not in text and "/root" in text and "EMPTY" in text and text.count(MASK) == 4
    assert r.deep({"a": ["my-private-token-123"], "b": 1}) == {"a": [MASK], "b": 1}
    prose = "a task-specific-kernel-name and mask-sk-shaped_identifier_here stay; flag = false"
    assert r(prose) == prose


def test_log_redaction_covers_child_loggers_and_urls(caplog):
    r = Redactor(["sekrit-value-42"])
    install_log_redaction(r)
    logger = logging.getLogger("openai._base_client.some.child")  # no handler or filter of its own
    with caplog.at_level(logging.DEBUG):
        logger.debug("headers %s", {"authorization": "Bearer sekrit-value-42"})
        logger.info("url http://user:hunter2pass@host/v1 key sekrit-value-42")
    assert "sekrit-value-42" not in caplog.text and "hunter2pass" not in caplog.text
    assert caplog.text.count(MASK) == 3 and "http://user:" in caplog.text


def test_scripted_model_text_tools_and_errors():
    from pydantic import BaseModel

    class Out(BaseModel):
        x: int

    m = ScriptedChatModel(replies=["hello", {"structured": {"x": 3}}, {"raise": "rate_limit"}])
    assert m.invoke("hi").content == "hello"
    assert m.with_structured_output(Out).invoke("give x") == Out(x=3)
    with pytest.raises(ScriptedTransportError) as err:
        m.invoke("again")
    assert err.value.status_code == 429 and is_retryable(err.value)
    with pytest.raises(IndexError, match="ran out of replies after 3"):
        m.invoke("more")
    assert len(m.calls) == 4


def test_cache_key_ignores_transport_settings():
    a = '{"id": ["x"], "kwargs": {"model_name": "m", "request_timeout": 5, "max_retries": 0}}---[]'
    b = '{"id": ["x"], "kwargs": {"model_name": "m", "request_timeout": 60, "openai_api_base": "http://h"}}---[]'
    c = '{"id": ["x"], "kwargs": {"model_name": "m2"}}---[]'
    assert cache_key("p", a) == cache_key("p", b) != cache_key("p", c)
    assert cache_key("p", a) != cache_key("q", a)


def test_gpu_facts_on_this_machine():
    facts = read_gpu_facts("cpu")
    assert facts.device == "cpu" and facts.sm_count is None
    props = probe_device(0)  # a real subprocess asking torch
    import torch

    if torch.cuda.is_available():
        assert props["sm_count"] == torch.cuda.get_device_properties(0).multi_processor_count
        assert read_gpu_facts("cuda").sm_count == props["sm_count"]
    else:
        assert props is None and read_gpu_facts("cuda").device == "cpu"
