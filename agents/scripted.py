"""Role-level scripted fakes: a Coder, Judge and Proposer that replay lists of replies.

They are first-class backends (tests, demos, `kiln run --llm replay:SCRIPT.json`), not mocks: the
Coder's replies go through the same code extraction as an LLM's, so a reply without code or with
several blocks fails exactly as it would live.

Replay is keyed by the request: the n-th time a given request is asked, the same reply comes back,
even in a new process when `memo_path` is set. A resumed run therefore re-asks a re-run node's
requests and gets the answers it got before, then continues down the script. Past the end of a
script, the last reply repeats.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from kiln.agents.base import (
    CoderReply,
    CoderTask,
    JudgeDecision,
    JudgeInput,
    ProposerInput,
    ProposerReply,
    Usage,
)
from kiln.agents.extract import extract_code
from kiln.tools.errors import KilnConfigError


class _Replay:
    """Which script entry answers which request."""

    def __init__(self, role: str, items: Sequence[Any], memo_path: Path | None) -> None:
        if not items:
            raise KilnConfigError(f"the {role} script is empty")
        self.role, self.items, self.memo_path = role, list(items), memo_path
        self.memo: dict[str, int] = json.loads(memo_path.read_text()) if memo_path and memo_path.exists() else {}
        self.asked: dict[str, int] = {}
        self.calls = 0
        self._lock = threading.Lock()

    def pick(self, request: BaseModel) -> Any:
        digest = hashlib.sha256(request.model_dump_json().encode()).hexdigest()[:20]
        with self._lock:
            n = self.asked.get(digest, 0)
            self.asked[digest] = n + 1
            key = f"{digest}#{n}"
            if key not in self.memo:
                self.memo[key] = max(self.memo.values(), default=-1) + 1
                if self.memo_path:
                    self.memo_path.write_text(json.dumps(self.memo))
            self.calls += 1
            return self.items[min(self.memo[key], len(self.items) - 1)]


def _usage(role: str, item: Any, tokens: int, usd: float | None) -> Usage:
    extra = item.get("usage", {}) if isinstance(item, dict) else {}
    return Usage(role=role, model="replay", input_tokens=extra.get("input_tokens", tokens),
                 output_tokens=extra.get("output_tokens", 0), cost_usd=extra.get("cost_usd", usd))


class ScriptedCoder:
    """Items: a reply text (code in one fenced block), or {"raw": text, "usage": {...}}."""

    def __init__(self, replies: Sequence[Any], *, memo_path: Path | None = None, tokens_per_call: int = 0,
                 usd_per_call: float | None = None) -> None:
        self._replay = _Replay("coder", replies, memo_path)
        self.tokens, self.usd = tokens_per_call, usd_per_call
        self.tasks: list[CoderTask] = []

    def write(self, task: CoderTask) -> CoderReply:
        self.tasks.append(task)
        item = self._replay.pick(task)
        raw = item["raw"] if isinstance(item, dict) else str(item)
        found = extract_code(raw)
        return CoderReply(ok=found.ok, source=found.code, error=found.error, raw=raw, notes=found.notes,
                          usage=_usage("coder", item, self.tokens, self.usd), failure=None if found.ok else "reply")


class ScriptedJudge:
    """Items: JudgeDecision fields as dicts (or JudgeDecision objects)."""

    def __init__(self, decisions: Sequence[Any], *, memo_path: Path | None = None, tokens_per_call: int = 0,
                 usd_per_call: float | None = None) -> None:
        self._replay = _Replay("judge", decisions, memo_path)
        self.tokens, self.usd = tokens_per_call, usd_per_call
        self.inputs: list[JudgeInput] = []

    def decide(self, inp: JudgeInput) -> JudgeDecision:
        self.inputs.append(inp)
        item = self._replay.pick(inp)
        data = item.model_dump() if isinstance(item, BaseModel) else {k: v for k, v in item.items() if k != "usage"}
        return JudgeDecision.model_validate({**data, "usage": _usage("judge", item, self.tokens, self.usd)})


class ScriptedProposer:
    """Items: {"cases": [{"name", "source", "rationale"}]} (or ProposerReply objects)."""

    def __init__(self, replies: Sequence[Any], *, memo_path: Path | None = None, tokens_per_call: int = 0,
                 usd_per_call: float | None = None) -> None:
        self._replay = _Replay("proposer", replies, memo_path)
        self.tokens, self.usd = tokens_per_call, usd_per_call
        self.inputs: list[ProposerInput] = []

    def propose(self, inp: ProposerInput) -> ProposerReply:
        self.inputs.append(inp)
        item = self._replay.pick(inp)
        data = item.model_dump() if isinstance(item, BaseModel) else {k: v for k, v in item.items() if k != "usage"}
        return ProposerReply.model_validate({**data, "usage": _usage("proposer", item, self.tokens, self.usd)})


ROLE_CLASSES = {"coder": ScriptedCoder, "judge": ScriptedJudge, "proposer": ScriptedProposer}


def load_replay(path: Path, role: str, *, memo_dir: Path | None = None) -> Any:
    """One role from a JSON script {"coder": [...], "judge": [...], "proposer": [...]}."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise KilnConfigError(f"cannot read replay script {path}: {err}") from None
    if not isinstance(data, dict) or not isinstance(data.get(role), list):
        raise KilnConfigError(f"replay script {path} has no list of {role} replies")
    memo = memo_dir / f"replay_{role}.json" if memo_dir else None
    opts = data.get("options", {})
    return ROLE_CLASSES[role](data[role], memo_path=memo, tokens_per_call=opts.get("tokens_per_call", 0),
                              usd_per_call=opts.get("usd_per_call"))
