"""A scripted chat model: a real langchain chat model whose replies come from a list.

It supports `bind_tools` and therefore `with_structured_output` (tool calling), reports token
usage, and can raise transport errors on cue, so the LLM roles, the transport and the graph run
unchanged with no network and no key. Script items:

- `"text"`: an assistant message with that content;
- `{"content": "...", "usage": {"input_tokens": 10, "output_tokens": 5}}`;
- `{"structured": {...}}`: a tool call carrying these arguments to the tool bound at call time
  (what `with_structured_output` binds), or JSON content when no tool is bound;
- `{"raise": "timeout" | "rate_limit" | "server_error"}`: fail this call the way a server would.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field, PrivateAttr

from kiln.tools.errors import KilnConfigError


class ScriptedTransportError(RuntimeError):
    """A scripted failure; `status_code` makes the transport classify it like an SDK error."""

    def __init__(self, kind: str) -> None:
        codes = {"rate_limit": 429, "server_error": 500, "auth": 401}
        self.status_code = codes.get(kind)
        super().__init__(f"scripted {kind}")


class ScriptedTimeout(TimeoutError):
    pass


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


class ScriptedChatModel(BaseChatModel):
    """Replays `replies` in order; running past the end is an error (a test bug, said plainly)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    replies: list[Any] = Field(default_factory=list)
    model_name: str = "scripted"
    _index: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _seen: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "kiln-scripted"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name}

    @property
    def calls(self) -> list[list[BaseMessage]]:
        """The messages of every call made so far (for tests that inspect prompts)."""
        return self._seen

    @property
    def remaining(self) -> int:
        return len(self.replies) - self._index

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any):
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _next(self) -> Any:
        with self._lock:
            if self._index >= len(self.replies):
                raise IndexError(f"scripted chat model ran out of replies after {len(self.replies)}")
            item = self.replies[self._index]
            self._index += 1
            return item

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self._seen.append(list(messages))
        item = self._next()
        message = _to_message(item, kwargs.get("tools"), messages)
        return ChatResult(generations=[ChatGeneration(message=message)])


def _to_message(item: Any, tools: list[dict] | None, messages: list[BaseMessage]) -> AIMessage:
    if isinstance(item, str):
        item = {"content": item}
    if "raise" in item:
        kind = item["raise"]
        raise ScriptedTimeout("scripted timeout") if kind == "timeout" else ScriptedTransportError(kind)
    content = item.get("content", "")
    tool_calls = []
    if "structured" in item:
        args = item["structured"]
        if tools:
            tool_calls = [{"name": tools[0]["function"]["name"], "args": args, "id": "call_scripted"}]
        else:
            content = json.dumps(args)
    prompt_text = " ".join(str(m.content) for m in messages)
    out_text = content + json.dumps(item.get("structured", ""))
    usage = item.get("usage") or {"input_tokens": _tokens(prompt_text), "output_tokens": _tokens(out_text)}
    usage = {**usage, "total_tokens": usage["input_tokens"] + usage["output_tokens"]}
    return AIMessage(content=content, tool_calls=tool_calls, usage_metadata=usage)


def load_script(path: Path) -> dict[str, list[Any]]:
    """A JSON file {"model": NAME?, "coder": [...], "judge": [...], "proposer": [...]}.

    Any role may be missing; "model" names the model whose prices apply (default: unpriced).
    """
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise KilnConfigError(f"cannot read LLM script {path}: {exc}") from None
    roles_ok = isinstance(data, dict) and all(isinstance(v, list) for k, v in data.items() if k != "model")
    if not roles_ok or not isinstance(data.get("model", ""), str):
        raise KilnConfigError(f"LLM script {path} must map role names to lists of replies")
    return data
