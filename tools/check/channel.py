"""Parent <-> worker commands: JSON lines over two named pipes in the worker's own directory.

The parent (kiln) drives every worker: it writes one command per line into `cmd.fifo` and reads one
reply per command from `rsp.fifo`. Replies come from processes that run untrusted code, so the
parent caps their size, parses them as plain JSON and validates every field it uses; nothing in a
reply is ever executed or unpickled. The parent opens both pipes read-write, so its opens never
block and a worker that dies never leaves it waiting on a pipe: the process handle's `poll()` and
the command's deadline say when to stop waiting.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
from pathlib import Path
from typing import Any

MAX_REPLY_BYTES = 8 << 20  # a reply above this is the worker's failure (a record, never a crash)
MAX_CONTAINERS = 250_000
"""JSON objects and arrays in one reply (counted by their opening brackets, strings included): an
8 MiB line of empty objects parsed into ~2 GB of Python dicts in kiln's process (a red-team commit
reply, 2026-12-07); the largest honest reply holds a few thousand."""
CMD, RSP = "cmd.fifo", "rsp.fifo"


class ChannelError(Exception):
    """A worker broke the protocol (reply too large, not JSON, not an object)."""


class ParentChannel:
    """The parent's end: `send` a command, `recv` the next reply (or None when none came in time)."""

    def __init__(self, work_dir: Path) -> None:
        self.dir = Path(work_dir)
        for name in (CMD, RSP):
            path = self.dir / name
            if not path.exists():
                os.mkfifo(path, 0o600)
        self._w = os.open(self.dir / CMD, os.O_RDWR)
        self._r = os.open(self.dir / RSP, os.O_RDWR | os.O_NONBLOCK)
        self._buf = b""

    def send(self, cmd: dict[str, Any]) -> None:
        data = (json.dumps(cmd) + "\n").encode()
        view = memoryview(data)
        while view:
            n = os.write(self._w, view)
            view = view[n:]

    def recv(self, timeout_s: float) -> dict[str, Any] | None:
        """The next complete reply line, parsed; None if none arrives within `timeout_s`."""
        line = self._pop_line()
        if line is not None:
            return _parse(line)
        ready, _, _ = select.select([self._r], [], [], max(0.0, timeout_s))
        if not ready:
            return None
        try:
            chunk = os.read(self._r, 1 << 20)
        except BlockingIOError:
            return None
        self._buf += chunk
        if len(self._buf) > MAX_REPLY_BYTES:
            raise ChannelError(f"a reply longer than {MAX_REPLY_BYTES >> 20} MiB")
        line = self._pop_line()
        return None if line is None else _parse(line)

    def _pop_line(self) -> bytes | None:
        if b"\n" not in self._buf:
            return None
        line, self._buf = self._buf.split(b"\n", 1)
        return line

    def close(self) -> None:
        """Close both ends, once: a second call closes nothing. (Closing a number twice would close
        whatever another thread opened under it meanwhile: a check beside this one, in a batch or a
        reward burst, saw its worker's reply pipe vanish, and the worker die of BrokenPipeError.)"""
        fds, self._w, self._r = (self._w, self._r), -1, -1
        for fd in fds:
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)


def _parse(line: bytes) -> dict[str, Any]:
    if line.count(b"{") + line.count(b"[") > MAX_CONTAINERS:
        raise ChannelError(f"a reply of more than {MAX_CONTAINERS} JSON objects and arrays")
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as exc:  # nested past Python's recursion limit: still the worker's
        raise ChannelError(f"a reply that is not JSON kiln reads ({line[:80]!r}...)") from exc
    if not isinstance(obj, dict):
        raise ChannelError(f"a reply that is not a JSON object ({type(obj).__name__})")
    if b"\\ud" in line or b"\\uD" in line:  # a surrogate escape: only a pair makes a character
        obj = whole_characters(obj)
    return obj


def whole_characters(obj: Any) -> Any:
    """`obj` with every lone UTF-16 surrogate in its strings (keys too) replaced by '?'. JSON's
    escapes can spell one ("\\ud800"); Python keeps it in a str that no UTF-8 encoder takes, so a
    candidate's error message holding one made kiln's record unwritable (a red-team find: `kiln
    check` died in its own output with a traceback and no JSON)."""
    if isinstance(obj, str):
        return obj.encode("utf-8", "replace").decode("utf-8")
    if isinstance(obj, list):
        return [whole_characters(v) for v in obj]
    if isinstance(obj, dict):
        return {whole_characters(k): whole_characters(v) for k, v in obj.items()}
    return obj


class WorkerChannel:
    """The worker's end: `next_command` (None while none has come), `reply` to each."""

    def __init__(self, work_dir: Path) -> None:
        self._r = os.open(Path(work_dir) / CMD, os.O_RDONLY)
        self._w = os.open(Path(work_dir) / RSP, os.O_WRONLY)
        for name in (CMD, RSP):  # opened on both sides: code loaded later can't open them by name
            with contextlib.suppress(OSError):
                os.unlink(Path(work_dir) / name)
        self._buf = b""

    def next_command(self, timeout_s: float) -> dict[str, Any] | None:
        while b"\n" not in self._buf:
            ready, _, _ = select.select([self._r], [], [], timeout_s)
            if not ready:
                return None
            chunk = os.read(self._r, 65536)
            if not chunk:
                raise EOFError("the parent closed the command pipe")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def reply(self, obj: dict[str, Any]) -> None:
        view = memoryview((json.dumps(obj, default=str) + "\n").encode())
        while view:
            view = view[os.write(self._w, view):]
