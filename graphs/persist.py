"""A SQLite checkpointer per run, with a strict msgpack allowlist: only the record types named in
the state schema may be loaded back (the LANGGRAPH_STRICT_MSGPACK behaviour, whatever the
environment says)."""

from __future__ import annotations

import sqlite3
import typing
from pathlib import Path

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from pydantic import BaseModel

from kiln.graphs.state import RunState

THREAD_ID = "kiln-run"
LEGACY = {("kiln.graphs.state", "StressCase")}
"""Names a checkpoint written before a record moved still carries (`kiln.graphs.state` re-exports
them), so an older run dir resumes."""


def _models_in(tp: object, out: set[type[BaseModel]]) -> None:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        if tp in out:
            return
        out.add(tp)
        for field in tp.model_fields.values():
            _models_in(field.annotation, out)
        return
    for arg in typing.get_args(tp):
        _models_in(arg, out)


def state_allowlist() -> set[tuple[str, str]]:
    """(module, class) of every pydantic record reachable from the state schema."""
    models: set[type[BaseModel]] = set()
    for hint in typing.get_type_hints(RunState, include_extras=True).values():
        _models_in(hint, models)
    return {(m.__module__, m.__name__) for m in models} | LEGACY


def open_checkpointer(run_dir: Path) -> SqliteSaver:
    conn = sqlite3.connect(str(run_dir / "checkpoints.sqlite"), check_same_thread=False)
    serde = JsonPlusSerializer(allowed_msgpack_modules=state_allowlist())
    return SqliteSaver(conn, serde=serde)


def run_config(recursion_limit: int) -> dict:
    return {"configurable": {"thread_id": THREAD_ID}, "recursion_limit": recursion_limit}
