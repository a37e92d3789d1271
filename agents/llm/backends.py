"""Backend specs (`PROVIDER:MODEL`) and chat-model construction, by name and lazily.

Providers: `openai:MODEL` (with `--base-url`, any OpenAI-compatible server: vLLM, SGLang, Ollama,
LM Studio), `anthropic:MODEL` (the `anthropic` extra), `builtin` (offline policies) and
`scripted:PATH` (replies from a JSON file, for tests). A missing package or key fails here, at
start, with a clear message; no provider is ever guessed or substituted.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from kiln.agents.llm.transport import TransportSettings, request_deadline
from kiln.tools.errors import KilnConfigError
from kiln.tools.records import JSON_SAFE

if TYPE_CHECKING:
    from kiln.agents.llm.cache import SqliteLLMCache

StructuredMethod = Literal["json_schema", "function_calling", "json_mode"]

PROVIDERS: dict[str, str] = {
    "openai": "OpenAI, or any OpenAI-compatible server with --base-url (openai:MODEL)",
    "anthropic": "Anthropic (anthropic:MODEL; pip install 'kernelkiln[anthropic]')",
    "builtin": "kiln's built-in offline policies (no LLM)",
    "scripted": "replies read from a JSON file, for tests (scripted:PATH)",
}
DEFAULT_METHOD: dict[str, StructuredMethod] = {
    "openai": "json_schema",
    "anthropic": "function_calling",
    "scripted": "function_calling",
}


class LLMSpec(BaseModel):
    """One role's backend: provider, model (or script path), and the server URL if any."""

    model_config = ConfigDict(**JSON_SAFE, frozen=True)

    provider: str
    model: str = ""
    base_url: str | None = None

    def __str__(self) -> str:
        text = f"{self.provider}:{self.model}" if self.model else self.provider
        return f"{text} @ {self.base_url}" if self.base_url else text


def parse_spec(text: str, *, base_url: str | None = None) -> LLMSpec:
    """`openai:gpt-4.1` -> LLMSpec. Unknown provider -> KilnConfigError listing the valid names."""
    provider, _, model = text.strip().partition(":")
    provider = provider.strip().lower()
    if provider not in PROVIDERS:
        names = ", ".join(sorted(PROVIDERS))
        raise KilnConfigError(f"unknown LLM provider {provider!r} in {text!r}; valid providers: {names}")
    model = model.strip()
    if provider in ("openai", "anthropic", "scripted") and not model:
        raise KilnConfigError(f"--llm {provider} needs a model: {provider}:MODEL")
    if provider == "builtin" and model:
        raise KilnConfigError(f"--llm builtin takes no model (got {text!r})")
    if base_url and provider != "openai":
        raise KilnConfigError(f"--base-url is for OpenAI-compatible servers (openai:MODEL), not {provider}")
    if base_url:
        check_base_url(base_url)
    return LLMSpec(provider=provider, model=model, base_url=base_url if provider == "openai" else None)


def check_base_url(url: str) -> None:
    """An http(s) URL with a host, e.g. http://127.0.0.1:8000/v1; anything else fails at start."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise KilnConfigError(f"--base-url {url!r} is not an http(s) URL with a host (e.g. http://127.0.0.1:8000/v1)")


def api_key_for(spec: LLMSpec, env: Mapping[str, str]) -> str | None:
    """The key a spec uses; raises KilnConfigError when a hosted API has none."""
    if spec.provider == "openai":
        key = env.get("OPENAI_API_KEY")
        if key:
            return key
        if spec.base_url:
            return "EMPTY"  # local servers accept any key
        raise KilnConfigError("openai backend needs OPENAI_API_KEY in the environment (or --base-url for a local server)")
    if spec.provider == "anthropic":
        key = env.get("ANTHROPIC_API_KEY")
        if not key:
            raise KilnConfigError("anthropic backend needs ANTHROPIC_API_KEY in the environment")
        return key
    return None


def rate_limiter(settings: TransportSettings) -> Any:
    """A client-side request limiter (langchain's, per process), or None when no limit is set."""
    if not settings.requests_per_second:
        return None
    from langchain_core.rate_limiters import InMemoryRateLimiter

    return InMemoryRateLimiter(requests_per_second=settings.requests_per_second, check_every_n_seconds=0.05)


def build_chat_model(spec: LLMSpec, *, settings: TransportSettings, env: Mapping[str, str],
                     cache: SqliteLLMCache | None = None, limiter: Any = None,
                     script: list[Any] | None = None) -> Any:
    """Construct the langchain chat model for a spec (not for `builtin`, which has none)."""
    common: dict[str, Any] = {"cache": cache if cache is not None else False}
    limiter = limiter if limiter is not None else rate_limiter(settings)
    if limiter is not None:
        common["rate_limiter"] = limiter
    if spec.provider == "openai":
        return _openai(spec, settings, api_key_for(spec, env), common)
    if spec.provider == "anthropic":
        return _anthropic(spec, settings, api_key_for(spec, env), common)
    if spec.provider == "scripted":
        from kiln.agents.llm.scripted import ScriptedChatModel

        return ScriptedChatModel(replies=list(script or []), model_name=f"scripted:{Path(spec.model).name}", **common)
    raise KilnConfigError(f"provider {spec.provider!r} has no chat model")


def deadline_http_client() -> Any:
    """The OpenAI SDK's default httpx client over `DeadlineTransport`: a reply still arriving after
    its request's deadline (`transport.bounded`) is closed at its next read, so an abandoned request
    to a trickling server does not keep a thread and a connection."""
    from openai import DefaultHttpxClient

    try:  # the HTTP library the OpenAI SDK itself uses (recent releases ship a fork, httpx2)
        import httpx2 as httpx
    except ImportError:
        import httpx  # type: ignore[no-redef]

    class _Deadlined(httpx.SyncByteStream):
        def __init__(self, inner: Any, deadline: float) -> None:
            self.inner, self.deadline = inner, deadline

        def __iter__(self) -> Any:
            import time

            for chunk in self.inner:
                if time.monotonic() > self.deadline:
                    raise httpx.ReadTimeout("the request's deadline passed while its reply was still arriving")
                yield chunk

        def close(self) -> None:
            self.inner.close()

    class DeadlineTransport(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            response = super().handle_request(request)
            deadline = request_deadline()
            if deadline is None:
                return response
            return httpx.Response(response.status_code, headers=response.headers, extensions=response.extensions,
                                  stream=_Deadlined(response.stream, deadline))

    return DefaultHttpxClient(transport=DeadlineTransport())


def _openai(spec: LLMSpec, settings: TransportSettings, key: str | None, common: dict[str, Any]) -> Any:
    from langchain_openai import ChatOpenAI

    kwargs: dict[str, Any] = {"model": spec.model, "api_key": key, "timeout": settings.timeout_s, "max_retries": 0,
                              "http_client": deadline_http_client()}
    if spec.base_url:
        # local servers implement /v1/chat/completions only
        kwargs.update(base_url=spec.base_url, use_responses_api=False)
    return ChatOpenAI(**kwargs, **common)


def _anthropic(spec: LLMSpec, settings: TransportSettings, key: str | None, common: dict[str, Any]) -> Any:
    if importlib.util.find_spec("langchain_anthropic") is None:
        raise KilnConfigError(
            "anthropic backend needs the langchain-anthropic package: pip install 'kernelkiln[anthropic]'"
        )
    from langchain_anthropic import ChatAnthropic

    return ChatAnthropic(model=spec.model, api_key=key, timeout=settings.timeout_s, max_retries=0,
                         max_tokens=16384, **common)


def structured_method(spec: LLMSpec, override: str | None = None) -> StructuredMethod:
    """json_schema for OpenAI-compatible servers, tool calling for Anthropic; `override` wins."""
    if override is not None:
        if override not in ("json_schema", "function_calling", "json_mode"):
            raise KilnConfigError(
                f"unknown structured-output method {override!r}; valid: json_schema, function_calling, json_mode"
            )
        return override  # type: ignore[return-value]
    return DEFAULT_METHOD.get(spec.provider, "function_calling")
