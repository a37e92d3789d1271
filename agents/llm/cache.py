"""An SQLite LLM-response cache, keyed by (model, messages, call parameters).

It plugs into langchain's own cache hook (`BaseChatModel(cache=...)`), so text replies and
structured output (tools, response formats) are cached the same way and replay through the same
parsers. Transport settings (timeouts, retries, the server URL, the key) are not part of the key:
changing them does not invalidate a recorded run.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.caches import RETURN_VAL_TYPE, BaseCache
from langchain_core.messages import message_to_dict, messages_from_dict
from langchain_core.outputs import ChatGeneration, Generation

HIT_MARK = "kiln_cache_hit"  # set in a replayed message's response_metadata

# constructor kwargs of chat models that say how to reach a server, not what to ask it
TRANSPORT_KWARGS = frozenset(
    {
        "max_retries",
        "request_timeout",
        "timeout",
        "default_request_timeout",
        "openai_api_base",
        "openai_api_key",
        "base_url",
        "anthropic_api_url",
        "anthropic_api_key",
        "api_key",
        "rate_limiter",
        "http_client",
        "default_headers",
    }
)


_CALL_TIMEOUT = re.compile(r"\('timeout', [^()]*?\)(, )?")


def normalize_llm_string(llm_string: str) -> str:
    """Drop transport kwargs from langchain's `dumps(model)---params` string: the constructor's, and a
    call's own `timeout` (cut to the minutes budget left, so it differs from call to call)."""
    head, sep, tail = llm_string.partition("---")
    tail = _CALL_TIMEOUT.sub("", tail).replace(", ]", "]")
    try:
        data = json.loads(head)
    except ValueError:
        return llm_string
    if isinstance(data, dict) and isinstance(data.get("kwargs"), dict):
        data["kwargs"] = {k: v for k, v in data["kwargs"].items() if k not in TRANSPORT_KWARGS}
    return json.dumps(data, sort_keys=True) + sep + tail


def cache_key(prompt: str, llm_string: str) -> str:
    blob = json.dumps([normalize_llm_string(llm_string), prompt])
    return hashlib.sha256(blob.encode()).hexdigest()


def _dump(gens: Sequence[Generation]) -> str:
    out: list[dict[str, Any]] = []
    for g in gens:
        if isinstance(g, ChatGeneration):
            out.append({"message": message_to_dict(g.message), "info": g.generation_info})
        else:
            out.append({"text": g.text, "info": g.generation_info})
    return json.dumps(out)


def _load(blob: str) -> list[Generation]:
    gens: list[Generation] = []
    for item in json.loads(blob):
        if "message" in item:
            msg = messages_from_dict([item["message"]])[0]
            msg.response_metadata = {**msg.response_metadata, HIT_MARK: True}
            gens.append(ChatGeneration(message=msg, generation_info=item["info"]))
        else:
            gens.append(Generation(text=item["text"], generation_info=item["info"]))
    return gens


def is_cache_hit(message: object) -> bool:
    meta = getattr(message, "response_metadata", None) or {}
    return bool(meta.get(HIT_MARK))


class SqliteLLMCache(BaseCache):
    """One table, one row per (model, messages, params). Thread-safe; opened on first use.

    Stored replies pass through `redact` first, so no secret is ever written to the file.
    """

    def __init__(self, path: Path, redact: Callable[[str], str] | None = None) -> None:
        self.path = Path(path)
        self._redact = redact or (lambda text: text)
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("CREATE TABLE IF NOT EXISTS llm_cache (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            conn.commit()
            self._conn = conn
        return self._conn

    def lookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        with self._lock:
            row = self._db().execute(
                "SELECT value FROM llm_cache WHERE key = ?", (cache_key(prompt, llm_string),)
            ).fetchone()
        if row is None:
            return None
        return _load(row[0])

    def update(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        with self._lock:
            db = self._db()
            db.execute(
                "INSERT OR REPLACE INTO llm_cache (key, value) VALUES (?, ?)",
                (cache_key(prompt, llm_string), self._redact(_dump(return_val))),
            )
            db.commit()

    def clear(self, **kwargs: Any) -> None:
        with self._lock:
            self._db().execute("DELETE FROM llm_cache")
            self._db().commit()

    def count(self) -> int:
        with self._lock:
            return int(self._db().execute("SELECT COUNT(*) FROM llm_cache").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
