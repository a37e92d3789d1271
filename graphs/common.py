"""What every node shares: wall-time accounting into state, progress events, file helpers."""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.config import get_stream_writer
from langgraph.types import Command

from kiln.graphs.context import RunContext
from kiln.graphs.state import Candidate, RunState


def emit(**event: Any) -> None:
    """A custom progress event for `stream_mode="custom"` (a no-op when nobody listens)."""
    with contextlib.suppress(RuntimeError):  # called outside a running graph (unit tests of helpers)
        get_stream_writer()(event)


def timed(stage: str) -> Callable:
    """Wrap a node: announce the stage, add its wall time to `elapsed_s`, stamp `stage`."""

    def deco(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def node(state: RunState, runtime: Any) -> Any:
            emit(stage=stage, iteration=state.get("iteration", 0))
            t0 = time.monotonic()
            out = fn(state, runtime)
            extra = {"elapsed_s": time.monotonic() - t0, "stage": stage}
            if isinstance(out, Command):
                return Command(goto=out.goto, update={**(out.update or {}), **extra})
            return {**(out or {}), **extra}

        return node

    return deco


def source_of(ctx: RunContext, cand: Candidate | None) -> str | None:
    if cand is None or cand.source_path is None:
        return None
    return (ctx.run_dir / cand.source_path).read_text()


def problem_src(ctx: RunContext) -> str:
    return ctx.problem.read_text()


def problem_name(ctx: RunContext) -> str:
    return Path(ctx.options.problem).stem
