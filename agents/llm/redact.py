"""Keep API keys out of logs, run directories, reports and exceptions.

`Redactor` knows the exact secret values in use (the keys the backends were built with, plus any
environment variable whose name looks secret) and also masks key-shaped strings it was not told
about. Everything kiln writes from the agent layer goes through `redact` first.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "[REDACTED]"
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
KEY_SHAPES = (
    re.compile(r"(?<![A-Za-z0-9_\-])sk-[A-Za-z0-9_\-]{20,}"),  # OpenAI / Anthropic style, standalone
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9_\-\.=]{8,}"),
    re.compile(r"(?i)(x-api-key[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9_\-\.]{8,}"),
    re.compile(r"(?i)(api[_-]?key[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9_\-\.]{8,}"),
    re.compile(r"(://[^/\s:@]+:)[^@\s/]+(?=@)"),  # a password in a URL's userinfo
)
MIN_SECRET_LEN = 6  # shorter values ("EMPTY", "1") would mask ordinary words
MIN_ENV_SECRET_LEN = 12  # env values are masked only when long enough to be a real credential
# (TOKENIZERS_PARALLELISM=false must not turn every "false" in a kernel into a mask)


def secrets_from_env(env: Mapping[str, str] | None = None) -> set[str]:
    env = os.environ if env is None else env
    return {v for k, v in env.items() if SECRET_NAME.search(k) and len(v) >= MIN_ENV_SECRET_LEN and " " not in v}


class Redactor:
    """Replaces known secret values and key-shaped strings with a mask."""

    def __init__(self, secrets: Iterable[str] = (), *, env: Mapping[str, str] | None = None) -> None:
        values = {s for s in secrets if s and len(s) >= MIN_SECRET_LEN} | secrets_from_env(env)
        # longest first, so a key that contains another is masked whole
        self._values = sorted(values, key=len, reverse=True)

    def add(self, secret: str | None) -> None:
        if secret and len(secret) >= MIN_SECRET_LEN and secret not in self._values:
            self._values = sorted([*self._values, secret], key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for value in self._values:
            text = text.replace(value, MASK)
        for shape in KEY_SHAPES:
            text = shape.sub(lambda m: (m.group(1) if m.groups() else "") + MASK, text)
        return text

    def deep(self, obj: Any) -> Any:
        """Redact every string inside JSON-like data (dicts, lists, strings)."""
        if isinstance(obj, str):
            return self(obj)
        if isinstance(obj, dict):
            return {k: self.deep(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self.deep(v) for v in obj]
        return obj


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """One-off redaction with the current environment's secrets plus `secrets`."""
    return Redactor(secrets)(text)


_ACTIVE: list[Redactor] = []


def install_log_redaction(redactor: Redactor) -> None:
    """Redact every log record this process creates, whatever logger or handler it goes to.

    A log-record factory formats the message and masks secrets at creation, so records from child
    loggers (`openai._base_client`, `httpx`) are covered too. Installing again swaps the redactor.
    """
    if not _ACTIVE:
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            # a malformed log call (args not matching msg) must still log: leave it as it is
            with contextlib.suppress(Exception):
                record.msg, record.args = _ACTIVE[0](record.getMessage()), None
            return record

        logging.setLogRecordFactory(factory)
        _ACTIVE.append(redactor)
    _ACTIVE[0] = redactor
