"""Server-sent events: each stream polls a cheap signature of what its page shows (the size of
`events.jsonl`, the store's modification times) and sends `change` when it moves; the page then
fetches its JSON again. A comment line every few seconds keeps proxies from closing the stream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from kiln.evals.ui.discover import mtime
from kiln.graphs.rundir import RunDir

KEEPALIVE_S = 10.0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def run_signature(run: Path) -> tuple:
    rd = RunDir(run)
    return (_size(rd.events), mtime(rd.summary), mtime(rd.llm))


def batch_signature(batch: Path, running: list[Path]) -> tuple:
    """The store (a finished sample), the problems folder (a started job) and the jobs known to be
    running (their progress); never a walk over every problem's folder."""
    problems = batch / "problems"
    started = tuple(mtime(d) for d in problems.iterdir()) if problems.is_dir() else ()
    return (mtime(batch / "results.sqlite"), mtime(batch / "results.sqlite-wal"), mtime(batch / "metrics.json"),
            mtime(problems), hash(started), tuple(_size(r / "events.jsonl") for r in running))


async def stream(request: Request, probe: Callable[[], object], poll_s: float) -> AsyncIterator[str]:
    last: object = None
    quiet = 0.0
    yield "retry: 1000\n\n"
    while not await request.is_disconnected():
        sig = await run_in_threadpool(probe)
        if sig != last:
            yield f"event: change\ndata: {json.dumps({'sig': str(hash(sig))})}\n\n"
            last, quiet = sig, 0.0
        elif quiet >= KEEPALIVE_S:
            yield ": keep-alive\n\n"
            quiet = 0.0
        await asyncio.sleep(poll_s)
        quiet += poll_s
