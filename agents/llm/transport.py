"""Transport policy for LLM calls: timeouts, retries with backoff on 429/5xx/timeouts, a rate limit.

The provider SDKs' own retry loops are switched off (`max_retries=0`) so that kiln decides, in one
place, what is retried, how long it waits and what the final error says.
"""

from __future__ import annotations

import contextvars
import functools
import json
import random
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from kiln.tools.records import JSON_SAFE

T = TypeVar("T")

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


class TransportSettings(BaseModel):
    """How one chat model talks to its server."""

    model_config = JSON_SAFE

    timeout_s: float = Field(180.0, gt=0, description="per request")
    max_attempts: int = Field(4, ge=1, description="first try plus retries")
    backoff_base_s: float = Field(1.0, ge=0, description="first wait; doubles each retry")
    backoff_max_s: float = Field(30.0, ge=0)
    requests_per_second: float | None = Field(None, gt=0, description="None: no client-side limit")


class LLMCallError(RuntimeError):
    """An LLM call failed for good (retries spent or a non-retryable error). Message is redacted."""


class BudgetExhausted(RuntimeError):
    """A budget (USD, tokens, minutes) is spent; no further LLM call is made."""


class RequestDeadline(TimeoutError):
    """The whole request (not one read of it) ran past its time: a server that hangs, or trickles
    its reply a few bytes at a time so that no per-read timeout ever fires. Retryable, like any timeout."""


REQUEST_GRACE_S = 0.5
"""How long past its deadline a request is waited for before it is abandoned."""

_local = threading.local()


def request_deadline() -> float | None:
    """The `time.monotonic()` deadline of the request this thread is making (None outside one):
    the HTTP transport (`backends.DeadlineTransport`) stops reading a reply once it has passed."""
    return getattr(_local, "deadline", None)


def bounded(fn: Callable[[], T], limit_s: float) -> T:
    """`fn()` with the whole call bounded by `limit_s`: it runs in a daemon thread (with the
    caller's context variables), and is abandoned with RequestDeadline when it has not returned by
    then. The HTTP transport sees the same deadline and closes the abandoned reply at its next read."""
    box: dict[str, Any] = {}
    ctx = contextvars.copy_context()

    def work() -> None:
        _local.deadline = time.monotonic() + limit_s
        try:
            box["out"] = ctx.run(fn)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["exc"] = exc

    worker = threading.Thread(target=work, name="kiln-llm-request", daemon=True)
    worker.start()
    worker.join(limit_s + REQUEST_GRACE_S)
    if worker.is_alive():
        raise RequestDeadline(f"the request did not complete in {limit_s:.0f} s (the server hung or trickled "
                              "its reply; the limit bounds the whole request, not each read)")
    if "exc" in box:
        raise box["exc"]
    return box["out"]


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an SDK error carries, if any (openai and anthropic both use `status_code`)."""
    code = getattr(exc, "status_code", None)
    return code if isinstance(code, int) else None


def is_retryable(exc: BaseException) -> bool:
    """429, 5xx, timeouts and dropped connections are retried; auth, bad request and parse errors not."""
    code = status_of(exc)
    if code is not None:
        return code in RETRY_STATUS or code >= 500
    if isinstance(exc, TimeoutError | ConnectionError | json.JSONDecodeError):
        return True  # a garbled body is a server-side glitch, like a 5xx
    name = type(exc).__name__
    return any(word in name for word in ("Timeout", "Connection", "RateLimit", "Overloaded"))


def retry_after_s(exc: BaseException) -> float | None:
    """The server's Retry-After header in seconds, when it sent one."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    try:
        return float(headers.get("retry-after"))
    except (TypeError, ValueError):
        return None


def backoff_s(attempt: int, settings: TransportSettings, exc: BaseException) -> float:
    """Exponential backoff with jitter, capped; a Retry-After from the server wins (also capped)."""
    hinted = retry_after_s(exc)
    if hinted is not None:
        return min(hinted, settings.backoff_max_s)
    base = settings.backoff_base_s * (2 ** (attempt - 1))
    return min(base * (1.0 + 0.25 * random.random()), settings.backoff_max_s)


def describe(exc: BaseException) -> str:
    """One line naming the failure: the status when there is one, then the SDK's message."""
    code = status_of(exc)
    text = " ".join(str(exc).split())[:300]
    if isinstance(exc, json.JSONDecodeError):
        return f"malformed response body (not JSON): {text}"
    prefix = f"HTTP {code}" if code is not None else type(exc).__name__
    return f"{prefix}: {text}" if text else prefix


def attempt_timeout_s(settings: TransportSettings, seconds_left: float | None) -> float | None:
    """This attempt's timeout: the configured one, cut to the budget left (None: no minutes budget,
    the client's own timeout applies). Raises BudgetExhausted when nothing is left."""
    if seconds_left is None:
        return None
    if seconds_left <= 0.5:
        raise BudgetExhausted("budget-minutes spent: no time left for another LLM request")
    return min(settings.timeout_s, seconds_left)


def call_with_retries(
    fn: Callable[[float | None], T],
    settings: TransportSettings,
    *,
    on_retry: Callable[[int, BaseException, float], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    seconds_left: Callable[[], float | None] = lambda: None,
) -> T:
    """Call `fn(timeout_s)`, retrying retryable errors up to `settings.max_attempts` in all.

    Each attempt is bounded as a whole (`bounded`): by `settings.timeout_s`, or with a minutes
    budget (`seconds_left` returns a number) by what is left, so neither a hanging nor a trickling
    server can hold the run past its budget; every wait fits in what is left too, and once it is
    spent, BudgetExhausted. Raises LLMCallError (unredacted; callers redact) naming the attempts
    and the last error.
    """
    for attempt in range(1, settings.max_attempts + 1):
        timeout = attempt_timeout_s(settings, seconds_left())
        try:
            return bounded(functools.partial(fn, timeout), timeout if timeout is not None else settings.timeout_s)
        except Exception as exc:  # noqa: BLE001 - every SDK error is classified below
            retry = is_retryable(exc) and attempt < settings.max_attempts
            if not retry:
                tries = f"after {attempt} attempt{'s' if attempt > 1 else ''}"
                kind = "retryable" if is_retryable(exc) else "not retryable"
                raise LLMCallError(f"LLM call failed {tries} ({kind}): {describe(exc)}") from None
            wait = backoff_s(attempt, settings, exc)
            left = seconds_left()
            if left is not None and left - wait <= 0.5:
                raise BudgetExhausted(f"budget-minutes spent while retrying: {describe(exc)}") from None
            if on_retry is not None:
                on_retry(attempt, exc, wait)
            sleep(wait)
    raise AssertionError("unreachable")  # pragma: no cover
