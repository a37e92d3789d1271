"""One role's handle on its chat model: budget check, retries, usage, cache-hit accounting, redaction.

Roles call `text(...)` (the Coder: one fenced code block in plain text) or `structured(...)` (the
Judge and the Proposer: a pydantic object through the backend's structured-output method, with
`include_raw=True` so a reply that fails to parse is data, retried once with the error).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict, ValidationError

from kiln.agents.base import Usage
from kiln.agents.llm.cache import is_cache_hit
from kiln.agents.llm.redact import Redactor
from kiln.agents.llm.transport import (
    BudgetExhausted,
    LLMCallError,
    TransportSettings,
    call_with_retries,
)
from kiln.agents.llm.usage import UsageTracker, cost_usd

MAX_REPLY_CHARS = 128_000
"""A reply longer than this is refused (a kernel module is a few KB; a runaway reply of megabytes
would otherwise be stored whole and pasted into every later prompt). What is kept is its head and tail."""


def clip(text: str | None, limit: int) -> str | None:
    """Keep the head and the tail of an over-long text, with a marker saying what was cut."""
    if text is None or len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


CACHE_PREFIX = "kiln_cache_prefix"
"""additional_kwargs key on a user message: how many leading characters are the same across a run's
calls (the problem). Anthropic clients turn it into a cache breakpoint; it is never sent."""


def user_message(stable: str, rest: str) -> HumanMessage:
    """The user turn as `stable + rest`: the part shared by every call of a run first (the problem),
    so providers' prefix caches hit; the length of that part is kept for cache breakpoints."""
    return HumanMessage(stable + rest, additional_kwargs={CACHE_PREFIX: len(stable)})


def with_breakpoints(messages: list[BaseMessage]) -> list[BaseMessage]:
    """Anthropic's explicit prompt caching: the system prompt and the user turn's stable prefix end
    with `cache_control` blocks (two of the four breakpoints a request may carry)."""
    mark = {"type": "ephemeral"}
    out: list[BaseMessage] = []
    for m in messages:
        n = m.additional_kwargs.get(CACHE_PREFIX)
        if isinstance(m, SystemMessage) and isinstance(m.content, str):
            out.append(SystemMessage([{"type": "text", "text": m.content, "cache_control": mark}]))
        elif isinstance(m, HumanMessage) and isinstance(m.content, str) and isinstance(n, int) and 0 < n < len(m.content):
            out.append(HumanMessage([{"type": "text", "text": m.content[:n], "cache_control": mark},
                                     {"type": "text", "text": m.content[n:]}]))
        else:
            out.append(m)
    return out


class TextReply(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    text: str
    usage: Usage
    oversized_chars: int | None = None  # the reply's length when it was over the cap (text is clipped)


class StructuredReply(BaseModel):
    """`parsed` is None when both attempts failed to parse; `error` then says why."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    parsed: Any = None
    error: str | None = None
    raw_text: str = ""
    usages: list[Usage] = []
    budget_stop: str | None = None  # the retry found a budget spent: why (the first attempt's usage is kept)

    @property
    def usage(self) -> Usage:
        """All attempts summed into one record (what the role reports)."""
        first = self.usages[0] if self.usages else Usage()
        costs = [u.cost_usd for u in self.usages if u.cost_usd is not None]
        return first.model_copy(update={
            "input_tokens": sum(u.input_tokens for u in self.usages),
            "output_tokens": sum(u.output_tokens for u in self.usages),
            "cost_usd": sum(costs) if costs else None,
            "latency_s": round(sum(u.latency_s for u in self.usages), 3),
            "cached": bool(self.usages) and all(u.cached for u in self.usages),
        })


def raw_text_of(message: AIMessage | None) -> str:
    """What the model said: its text, and the arguments of any tool call."""
    if message is None:
        return ""
    parts = [message.content if isinstance(message.content, str) else json.dumps(message.content)]
    parts += [json.dumps(tc.get("args", {})) for tc in message.tool_calls]
    return "\n".join(p for p in parts if p)


class LLMClient:
    def __init__(self, role: str, chat_model: Any, *, model_name: str, tracker: UsageTracker,
                 redactor: Redactor, settings: TransportSettings | None = None,
                 method: str = "function_calling", label: str | None = None,
                 retry_prompt: Callable[[str, str], str] | None = None,
                 sleep: Callable[[float], None] = time.sleep, max_reply_chars: int = MAX_REPLY_CHARS,
                 cache_breakpoints: bool = False) -> None:
        self.role, self.chat_model, self.model_name = role, chat_model, model_name
        self.tracker, self.redactor, self.method = tracker, redactor, method
        self.label = label or model_name  # names the backend in errors, e.g. "openai:m @ http://host/v1"
        self.settings = settings or TransportSettings()
        self.retry_prompt = retry_prompt or _default_retry_prompt
        self._sleep = sleep
        self.max_reply_chars = max_reply_chars
        self.cache_breakpoints = cache_breakpoints  # Anthropic: explicit cache_control blocks

    def _invoke(self, runnable: Any, messages: list[BaseMessage]) -> tuple[Any, float, bool]:
        reason = self.tracker.exhausted()
        if reason:
            raise BudgetExhausted(reason)
        messages = with_breakpoints(messages) if self.cache_breakpoints else [_plain(m) for m in messages]
        t0 = time.monotonic()
        try:
            out = call_with_retries(lambda t: runnable.invoke(messages, **({"timeout": t} if t else {})),
                                    self.settings, sleep=self._sleep, seconds_left=self.tracker.seconds_left)
        except LLMCallError as exc:
            self.tracker.record_failure(self.role)
            raise LLMCallError(self.redactor(f"{self.role} ({self.label}): {exc}")) from None
        message = out.get("raw") if isinstance(out, dict) else out
        return out, time.monotonic() - t0, is_cache_hit(message)

    def _usage(self, message: AIMessage | None, latency_s: float, cached: bool) -> Usage:
        meta: dict[str, Any] = dict((message.usage_metadata if message is not None else None) or {})
        n_in, n_out = int(meta.get("input_tokens", 0)), int(meta.get("output_tokens", 0))
        read = int((meta.get("input_token_details") or {}).get("cache_read") or 0)
        usage = Usage(role=self.role, model=self.model_name, input_tokens=n_in, output_tokens=n_out,
                      cost_usd=cost_usd(self.model_name, n_in, n_out), latency_s=round(latency_s, 3),
                      cached=cached, cache_read_tokens=read)
        self.tracker.record(usage)
        return usage

    def text(self, messages: list[BaseMessage]) -> TextReply:
        """One plain-text call. Raises BudgetExhausted or LLMCallError (redacted). A reply over the
        size cap comes back clipped, with `oversized_chars` set: the caller refuses it."""
        message, latency, cached = self._invoke(self.chat_model, messages)
        usage = self._usage(message, latency, cached)
        text = raw_text_of(message)
        over = len(text) if len(text) > self.max_reply_chars else None
        return TextReply(text=self.redactor(clip(text, self.max_reply_chars) or ""), usage=usage, oversized_chars=over)

    def structured(self, messages: list[BaseMessage], schema: type[BaseModel]) -> StructuredReply:
        """A typed reply; a parse failure is retried once with the error, then returned as data."""
        # A JSON-schema dict (not the class) so no SDK validates inside the call: invalid JSON and
        # schema violations both come back here as data.
        runnable = self.chat_model.with_structured_output(schema_dict(schema), method=self.method, include_raw=True)
        reply = StructuredReply()
        for attempt in (1, 2):
            try:
                out, latency, cached = self._invoke(runnable, messages)
            except BudgetExhausted as exc:
                if attempt == 1:
                    raise
                reply.budget_stop = str(exc)  # the answered first attempt stays counted (usages)
                return reply
            raw = out.get("raw")
            reply.usages.append(self._usage(raw, latency, cached))
            text = raw_text_of(raw)
            reply.raw_text = self.redactor(clip(text, self.max_reply_chars) or "")
            parsed, error = _validate(schema, self.redactor.deep(out.get("parsed")), out.get("parsing_error"))
            if len(text) > self.max_reply_chars:
                parsed, error = None, (f"the reply is {len(text)} characters, over kiln's cap of "
                                       f"{self.max_reply_chars}: answer with less")
            if error is None:
                reply.parsed, reply.error = parsed, None
                return reply
            reply.error = self.redactor(" ".join(str(error).split())[:1500])
            if attempt == 1:
                messages = [*messages, HumanMessage(self.retry_prompt(clip(reply.raw_text, 4000) or "", reply.error))]
        return reply


def _plain(m: BaseMessage) -> BaseMessage:
    """The message as sent to servers without explicit caching (OpenAI caches prefixes by itself)."""
    if CACHE_PREFIX not in m.additional_kwargs:
        return m
    return m.model_copy(update={"additional_kwargs": {k: v for k, v in m.additional_kwargs.items()
                                                      if k != CACHE_PREFIX}})


def schema_dict(schema: type[BaseModel]) -> dict[str, Any]:
    """The pydantic class as a self-contained JSON schema with a title (references inlined)."""
    fn = convert_to_openai_tool(schema)["function"]
    return {"title": fn["name"], "description": fn.get("description", ""), **fn["parameters"]}


def _validate(schema: type[BaseModel], parsed: Any, error: Any) -> tuple[BaseModel | None, str | None]:
    if error is not None:
        return None, str(error)
    if parsed is None:
        return None, "the reply held no structured output"
    try:
        return schema.model_validate(parsed), None
    except ValidationError as exc:
        return None, str(exc)


def _default_retry_prompt(raw: str, error: str) -> str:
    from kiln.agents import prompts

    return prompts.render("structured_retry.j2", raw=raw, error=error)
