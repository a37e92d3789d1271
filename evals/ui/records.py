"""Reading what one run recorded: its events, candidates' check records, LLM call logs and the
LangGraph checkpoint. Everything is read as plain JSON (never validated into records), so a run
written by an older or newer kiln, or one still being written, still shows what it has."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from kiln.evals.ui.roots import read_json, read_text
from kiln.graphs.rundir import RunDir

_CKPT_LOCK = threading.Lock()


def events(run: Path) -> list[dict]:
    """Every complete line of events.jsonl (a half-written last line is skipped)."""
    text = read_text(RunDir(run).events) or ""
    out = []
    for line in text.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            out.append(item)
    return out


def check_files(run: Path, cid: str) -> list[Path]:
    """A candidate's check records in order: check.json, check_1.json, ..."""
    return RunDir(run).check_files(cid)


def last_check(run: Path, cid: str) -> dict | None:
    files = check_files(run, cid)
    rec = read_json(files[-1]) if files else None
    return rec if isinstance(rec, dict) else None


def llm_calls(run: Path) -> list[dict]:
    """Each LLM call log with its file name and a time (the log's own `t`, else the file's mtime)."""
    out = []
    for path in RunDir(run).llm_calls():
        data = read_json(path)
        if not isinstance(data, dict):
            continue
        t = data.get("t")
        out.append({**data, "file": path.name, "t": t if isinstance(t, int | float) else path.stat().st_mtime})
    return out


def coder_call_for(run: Path, calls: list[dict], order: list[str]) -> dict[str, dict]:
    """Which Coder call wrote which candidate: the k-th Coder call wrote the k-th candidate, unless
    a reply's code matches another candidate's kernel exactly (a resumed run re-asks)."""
    coder = [c for c in calls if c.get("role") == "coder"]
    out: dict[str, dict] = {}
    for k, cid in enumerate(order):
        src = read_text(RunDir(run).kernel(cid))
        match = next((c for c in coder if src and (c.get("reply") or {}).get("source") == src), None)
        out[cid] = match or (coder[k] if k < len(coder) else {})
    return out


def _open_saver(path: Path) -> Any:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    from langgraph.checkpoint.sqlite import SqliteSaver

    from kiln.graphs.persist import state_allowlist

    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False, timeout=2)
    return SqliteSaver(conn, serde=JsonPlusSerializer(allowed_msgpack_modules=state_allowlist()))


_STATE_CACHE: dict[Path, tuple[tuple, dict]] = {}


def checkpoint_state(run: Path) -> dict:
    """The latest LangGraph state (MCTS statistics, decisions after hard rules, usage), read-only;
    {} when there is none or it cannot be read right now. Cached until the database changes."""
    path = run / "checkpoints.sqlite"
    if not path.is_file():
        return {}
    key = tuple(_stamp(run / n) for n in ("checkpoints.sqlite", "checkpoints.sqlite-wal"))
    hit = _STATE_CACHE.get(path)
    if hit and hit[0] == key:
        return hit[1]
    state = _read_state(path)
    if state:
        _STATE_CACHE[path] = (key, state)
    return state


def _stamp(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (0, 0)
    return (st.st_mtime_ns, st.st_size)


def _read_state(path: Path) -> dict:
    from kiln.graphs.persist import THREAD_ID

    with _CKPT_LOCK:
        try:
            saver = _open_saver(path)
            try:
                tup = saver.get_tuple({"configurable": {"thread_id": THREAD_ID}})
            finally:
                saver.conn.close()
        except Exception:  # noqa: BLE001 - locked, half-written or from another version: show the rest
            return {}
    return dict(tup.checkpoint.get("channel_values", {})) if tup else {}


def warm_imports() -> None:
    """LangGraph's import takes about a second: pay it at start-up, not on the first page."""
    import langgraph.checkpoint.sqlite  # noqa: F401

    import kiln.graphs.persist  # noqa: F401
