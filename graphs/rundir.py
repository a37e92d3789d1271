"""The run directory: every prompt and reply, every candidate's source and check record, the check
cache (by content hash, so a resumed run never re-checks a finished candidate), the best kernel and
the summary. Everything written here passes through `redact` first: no secret from the
environment ever lands on disk."""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from kiln.agents.llm.redact import MASK, SECRET_NAME
from kiln.agents.llm.redact import redact as llm_redact
from kiln.tools.files import write_atomic
from kiln.tools.records import CheckOptions, CheckRecord

_URL_USERINFO = re.compile(r"(https?://)[^/@\s]+@")
_MIN_ENV_SECRET_LEN = 8  # stricter than the agent layer's default: run dirs are meant to be shared


def redact(text: str) -> str:
    """The agent layer's redaction (known secrets, key-shaped strings), plus every secret-looking
    environment value of 8+ characters and whole URL credentials (`https://TOKEN@host` too)."""
    env_secrets = [v for k, v in os.environ.items() if SECRET_NAME.search(k) and len(v) >= _MIN_ENV_SECRET_LEN]
    return _URL_USERINFO.sub(rf"\1{MASK}@", llm_redact(text, env_secrets))


M = TypeVar("M", bound=BaseModel)


def redact_model(model: M) -> M:
    """The same record with secrets replaced (for records kept in checkpointed state)."""
    return type(model).model_validate_json(redact(model.model_dump_json()))


def write(run_dir: Path, rel: str, text: str) -> Path:
    path = run_dir / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, redact(text))
    return path


def write_json(run_dir: Path, rel: str, obj: BaseModel | dict | list) -> Path:
    text = obj.model_dump_json(indent=2) if isinstance(obj, BaseModel) else json.dumps(obj, indent=2)
    return write(run_dir, rel, text)


def event(run_dir: Path, kind: str, **fields: object) -> None:
    """Append one line to events.jsonl (what happened, in order; tests and humans read it)."""
    line = json.dumps({"t": round(time.time(), 3), "kind": kind, **fields}, default=str)
    with (run_dir / "events.jsonl").open("a") as fh:
        fh.write(redact(line) + "\n")


def events(run_dir: Path) -> list[dict]:
    path = run_dir / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def check_key(source: str, case_paths: list[Path], options: CheckOptions) -> str:
    """Content hash of everything that decides a check's outcome (the seed excepted)."""
    parts = [source, options.model_dump_json(exclude={"cases", "seed"})]
    parts += [p.name + "\n" + p.read_text() for p in sorted(case_paths)]
    return sha("\0".join(parts))[:24]


def cached_check(run_dir: Path, key: str) -> CheckRecord | None:
    path = run_dir / "checks" / f"{key}.json"
    if not path.exists():
        return None
    return CheckRecord.model_validate_json(path.read_text())


def store_check(run_dir: Path, key: str, record: CheckRecord) -> Path:
    return write_json(run_dir, f"checks/{key}.json", record)


def next_llm_index(run_dir: Path) -> int:
    folder = run_dir / "llm"
    return 1 + (len(list(folder.glob("*.json"))) if folder.exists() else 0)


def prompt_of(agent: object, request: BaseModel) -> str | None:
    """The exact messages an LLM-backed role sends for this request (None for other backends)."""
    render = getattr(agent, "messages", None)
    if not callable(render):
        return None
    try:
        return "\n\n".join(f"[{m.type}]\n{m.content}" for m in render(request))
    except Exception as err:  # noqa: BLE001 - logging must never break the run
        return f"(prompt not rendered: {type(err).__name__}: {err})"


def log_llm_call(run_dir: Path, role: str, request: BaseModel, reply: BaseModel, agent: object = None) -> str:
    """One file per call: the request record, the prompt when the backend exposes it, the reply."""
    idx = next_llm_index(run_dir)
    rel = f"llm/{idx:04d}_{role}.json"
    prompt = prompt_of(agent, request)
    payload = {
        "role": role,
        "request": request.model_dump(mode="json"),
        "prompt": prompt,
        "reply": reply.model_dump(mode="json"),
    }
    write_json(run_dir, rel, payload)
    raw = getattr(reply, "raw", None)
    if raw:
        write(run_dir, f"llm/{idx:04d}_{role}_reply.md", raw)
    return rel
