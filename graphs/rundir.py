"""The run directory: every prompt and reply, every candidate's source and check record, the check
cache (by content hash, so a resumed run never re-checks a finished candidate), the best kernel and
the summary. Everything written here passes through `redact` first: no secret from the
environment ever lands on disk. `RunDir` is its layout, the one place that knows where each file lies."""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, TypeVar

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


class _At:
    """One file (or folder) of a run directory as an attribute: `RunDir(root).summary` is root/summary.json."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, rd: RunDir, owner: type | None = None) -> Path:
        return rd.root / self.name


@dataclass(frozen=True)
class RunDir:
    """Where each file of a run directory lies (rundir_readme.md says what each holds). The writers take
    their paths from here and every reader (the batch jobs, the UI, model mode) reads through it, so no
    one re-derives the layout. `*_rel` names are run-dir-relative, as the state and records keep them."""

    root: Path
    OPTIONS: ClassVar[str] = "run.json"
    SUMMARY: ClassVar[str] = "summary.json"
    EVENTS: ClassVar[str] = "events.jsonl"
    BEST_KERNEL: ClassVar[str] = "best_kernel.py"
    REWARDS: ClassVar[str] = "rewards.jsonl"
    CANDIDATES: ClassVar[str] = "candidates"
    CHECKS: ClassVar[str] = "checks"
    LLM: ClassVar[str] = "llm"

    options = _At(OPTIONS)
    summary = _At(SUMMARY)
    events = _At(EVENTS)
    llm = _At(LLM)

    @staticmethod
    def candidate_rel(cid: str, name: str) -> str:
        """A file of one candidate: kernel.py, check.json, reward.json, profile.json, profile.txt, ..."""
        return f"{RunDir.CANDIDATES}/{cid}/{name}"

    def candidate(self, cid: str) -> Path:
        return self.root / self.CANDIDATES / cid

    def kernel(self, cid: str) -> Path:
        return self.root / self.candidate_rel(cid, "kernel.py")

    def candidate_ids(self) -> list[str]:
        """Every candidate folder on disk, in id order (RunSummary.candidate_ids lists the same when finished)."""
        folder = self.root / self.CANDIDATES
        return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []

    def numbered(self, cid: str, stem: str) -> list[Path]:
        """A candidate's `stem.json`, `stem_1.json`, ... in order (checks of one kernel against newer suites)."""
        return sorted(self.candidate(cid).glob(f"{stem}*.json"), key=lambda p: (len(p.name), p.name))

    def next_rel(self, cid: str, stem: str) -> str:
        n = len(self.numbered(cid, stem))
        return self.candidate_rel(cid, f"{stem}{'' if n == 0 else f'_{n}'}.json")

    def check_files(self, cid: str) -> list[Path]:
        return self.numbered(cid, "check")

    def last_check(self, cid: str) -> Path | None:
        """A candidate's current verdict: its highest-numbered check record."""
        files = self.check_files(cid)
        return files[-1] if files else None

    def cached_check(self, key: str) -> Path:
        return CheckCache(self.root / self.CHECKS).path(key)

    def llm_calls(self) -> list[Path]:
        """Each LLM call's log (`NNNN_<role>.json`), in order."""
        return sorted(self.llm.glob("*.json")) if self.llm.is_dir() else []

    def next_llm_rel(self, role: str) -> str:
        return f"{self.LLM}/{1 + len(self.llm_calls()):04d}_{role}.json"


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
    with RunDir(run_dir).events.open("a") as fh:
        fh.write(redact(line) + "\n")


def events(run_dir: Path) -> list[dict]:
    path = RunDir(run_dir).events
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


@dataclass(frozen=True)
class CheckCache:
    """Check records by content key (`check_key`), one file each in `folder`: the loop's cache
    (RUN_DIR/checks/) and model mode's confirmation checks (RUN_DIR/confirm/) both go through it, so
    nothing already checked with the same source, options and cases is checked again."""

    folder: Path

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def get(self, key: str) -> CheckRecord | None:
        path = self.path(key)
        return CheckRecord.model_validate_json(path.read_text()) if path.is_file() else None

    def put(self, key: str, record: CheckRecord) -> Path:
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, redact(record.model_dump_json(indent=2)))
        return path


def cached_check(run_dir: Path, key: str) -> CheckRecord | None:
    return CheckCache(run_dir / RunDir.CHECKS).get(key)


def store_check(run_dir: Path, key: str, record: CheckRecord) -> Path:
    return CheckCache(run_dir / RunDir.CHECKS).put(key, record)


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
    rel = RunDir(run_dir).next_llm_rel(role)
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
        write(run_dir, rel.removesuffix(".json") + "_reply.md", raw)
    return rel
