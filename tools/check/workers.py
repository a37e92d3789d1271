"""The parent's handles on a check's workers: start one in its contained process, send it commands,
wait for replies under deadlines the parent keeps on its own clock.

A worker that dies, hangs past a deadline or breaks the protocol raises `WorkerGone` with how its
process ended (exit code or signal, the stage, the tail of its stderr); the session turns that into
the candidate's `crashed` / `timeout` record or, for the reference, a broken-problem error.
"""

from __future__ import annotations

import contextlib
import secrets
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kiln.tools.check.channel import ChannelError, ParentChannel
from kiln.tools.check.messages import ErrorReply, Msg, Reply, reply_model
from kiln.tools.check.worker import JobSpec
from kiln.tools.sandbox.confine import Confinement
from kiln.tools.sandbox.isolation import (
    IsolatedProc,
    ProcResult,
    default_as_limit,
    scrubbed_env,
    start_isolated,
)

POLL_S = 0.05
EXIT_WAIT_S = 2.0
WATCH_EVERY_S = 1.0
STDERR_MAX_BYTES = 64 << 20
"""A worker's stderr (a file in kiln's control dir, in RAM) past this stops the worker: honest ones
write kilobytes; RLIMIT_FSIZE alone would let each hold 4 GiB of the machine's memory."""


class WorkerGone(Exception):
    """The worker can't answer: it died, ran past the command's deadline, or broke the protocol."""

    def __init__(self, result: ProcResult, during: str, *, timed_out: bool = False, why: str = "") -> None:
        super().__init__(why or f"worker gone during {during}")
        self.result, self.during, self.timed_out, self.why = result, during, timed_out, why


class CommandFailed(Exception):
    """The worker answered, but the command failed: `error` is its {kind, where, message, traceback}."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(str(error.get("message", "")))
        self.error = error

    @property
    def kind(self) -> str:
        return str(self.error.get("kind", "candidate"))


SCRATCH_BYTES = 2 << 30  # a worker's private tmpfs (nvcc and Triton temporaries): RAM it may use for files


def worker_env(spec: JobSpec, cache_dir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The worker's environment: scrubbed, its temporary files and home in its own scratch dir
    (`tmp/`, the only place in its own dir where it may create files: Triton's JIT and nvcc write
    temporaries)."""
    tmp = Path(spec.work_dir) / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    return scrubbed_env(device=spec.device, gpu_index=spec.gpu_index, cache_dir=cache_dir,
                        extra={**(extra or {}), "TMPDIR": str(tmp), "HOME": str(tmp)})


def worker_confinement(spec: JobSpec, cache_dir: Path) -> Confinement:
    """What a worker may reach (kiln.tools.sandbox.box), in a check dir laid out as `layout` says:
    every role reads `shared/` (problem, cases, candidate); a reference writes its part of `feed/`
    (weights, small inputs: the problem's at the top, a case's in its own subdir) and reads `cand-out/`
    (to judge); the candidate reads `feed/`, fills the files kiln
    made in `cand-out/` and writes its compile-cache dir; the baseline writes its compile cache."""
    work = Path(spec.work_dir)
    check = work.parent
    read, write, fill = [str(check / "shared")], [str(work)], []
    if spec.role == "reference":  # each reference writes its own cases' part of `feed/` only
        read.append(str(check / "cand-out"))
        write.append(spec.feed_dir or str(check / "feed"))
    elif spec.role == "candidate":
        read.append(str(check / "feed"))
        fill.append(str(check / "cand-out"))
        write.append(str(cache_dir))
    else:
        write.append(str(cache_dir))
    write += [spec.profile_dir] if spec.profile_dir else []
    return Confinement(read=tuple(read), write=tuple(write), fill=tuple(fill), scratch_bytes=SCRATCH_BYTES,
                       locked_own=True)


class WorkerHandle:
    """One running worker and its command channel."""

    on_timeout: Any = None  # () -> None: what to stop before this worker when its deadline passes
    while_waiting: Any = None  # () -> None, called while kiln waits for this worker; may raise to end the check

    def __init__(self, spec: JobSpec, *, env: dict[str, str], zygote: Any, backstop_s: float,
                 confinement: Any = None, sandbox: Any = None, watch: Any = None) -> None:
        self.spec, self.role = spec, spec.role
        self.watch = watch  # () -> why the worker must stop (a bound it broke), or None; polled while it works
        self.watched = 0.0
        work = Path(spec.work_dir)
        work.mkdir(parents=True, exist_ok=True)
        (work / "job.json").write_text(spec.model_dump_json())
        self.chan = ParentChannel(work)
        argv = [sys.executable, "-m", "kiln.tools.check.worker", spec.role, str(work / "job.json")]
        self.started = time.monotonic()
        self.proc: IsolatedProc = start_isolated(argv, env=env, cwd=work, timeout_s=backstop_s,
                                                 as_limit_bytes=default_as_limit(spec.device), zygote=zygote,
                                                 confinement=confinement, sandbox=sandbox)
        self.pending: list[tuple[str, str]] = []  # (op, id) of commands sent, replies not yet read

    def send(self, cmd: Msg) -> None:
        op = str(cmd.op)
        nonce = secrets.token_hex(8)  # the reply must carry it: a line written by anyone else is refused
        self.chan.send({**cmd.model_dump(mode="json"), "id": nonce})
        self.pending.append((op, nonce))

    def recv(self, deadline: float) -> dict[str, Any]:
        """The reply to the oldest command sent; raises WorkerGone past `deadline` (monotonic)."""
        op, nonce = self.pending[0] if self.pending else ("?", None)
        while True:
            try:
                reply = self.chan.recv(POLL_S)
                if reply is not None and reply.get("id") != nonce:
                    raise ChannelError(f"a reply to {op!r} that is not the worker's (wrong id)")
            except ChannelError as exc:
                self.kill()
                raise WorkerGone(self._result(), op, why=f"broke the worker protocol: {exc}") from exc
            if reply is not None:
                self.pending.pop(0)
                return reply
            res = self.proc.poll()
            if res is not None:
                raise WorkerGone(res, op, timed_out=res.timed_out)
            if time.monotonic() > deadline:
                if self.on_timeout is not None:
                    self.on_timeout()
                self.kill()
                raise WorkerGone(self._result(), op, timed_out=True)
            self._check_bounds(op)

    def _check_bounds(self, op: str) -> None:
        if self.while_waiting is not None:
            self.while_waiting()
        why = self.bound_broken()
        if why:
            self.kill()
            raise WorkerGone(self._result(), op, why=f"was stopped: {why}")

    def bound_broken(self) -> str | None:
        """Why the worker must stop (a bound it broke: its `watch`, its stderr), at most once every
        `WATCH_EVERY_S`; None when within (or when not yet time to look again)."""
        now = time.monotonic()
        if now - self.watched < WATCH_EVERY_S or self.proc.poll() is not None:
            return None
        self.watched = now
        if self.proc.stderr_bytes() > STDERR_MAX_BYTES:
            return f"its stderr grew past {STDERR_MAX_BYTES >> 20} MiB"
        return self.watch() if self.watch is not None else None

    def recv_reply(self, deadline: float) -> Reply:
        """`recv`, validated against the oldest pending command's reply model: a failed command
        raises CommandFailed, a reply that does not fit its model is the worker breaking the protocol."""
        op = self.pending[0][0] if self.pending else "?"
        raw = self.recv(deadline)
        return parse_reply(self.role, op, raw, self)

    def call(self, cmd: Msg, deadline: float) -> Reply:
        """Send `cmd` and wait for its reply. Only with no reply outstanding: replies come in order,
        so an earlier command's would be taken for this one's."""
        if self.pending:
            raise RuntimeError(f"{self.role} worker: call({cmd.op!r}) with replies to "
                               f"{[p[0] for p in self.pending]} unread")
        self.send(cmd)
        return self.recv_reply(deadline)

    def kill(self) -> None:
        self.proc.kill()

    def _result(self) -> ProcResult:
        return self.proc.poll() or self.proc.wait()

    def ask_exit(self) -> None:
        """Tell the worker to exit without waiting for it: `close` collects it later, so its teardown
        (a CUDA context, GBs of memory) overlaps what the parent does meanwhile."""
        from kiln.tools.check.messages import Exit

        if self.proc.poll() is None and not self.pending:
            with contextlib.suppress(OSError):
                self.send(Exit())

    def close(self) -> ProcResult:
        """Ask the worker to exit (unless `ask_exit` did), then make sure its whole process group is gone."""
        if self.proc.poll() is None:
            from kiln.tools.check.messages import Exit

            with contextlib.suppress(OSError, WorkerGone):
                asked = bool(self.pending) and self.pending[-1][0] == "exit"
                self.pending = self.pending[-1:] if asked else []
                if not asked:
                    self.send(Exit())
                self.recv(time.monotonic() + EXIT_WAIT_S)
        if self.proc.poll() is None:
            self.proc.kill()
        self.chan.close()
        return self._result()


def parse_reply(role: str, op: str, raw: dict[str, Any], handle: WorkerHandle | None = None) -> Reply:
    """A worker's reply as its typed record. An error reply raises CommandFailed; a reply that fits
    neither raises WorkerGone (the worker broke the protocol, and is killed)."""
    try:
        if raw.get("ok") is not True:
            err = ErrorReply.model_validate(raw).error
            raise CommandFailed(err.model_dump())
        return reply_model(role, op).model_validate(raw)
    except ValidationError as exc:
        raise invalid_reply(op, exc, handle) from None


def invalid_reply(op: str, exc: ValidationError, handle: WorkerHandle | None = None) -> WorkerGone:
    """A reply (or a part of one typed later) that does not fit its record: the worker broke the
    protocol, and is killed."""
    if handle is not None:
        handle.kill()
    res = handle._result() if handle is not None else ProcResult()
    return WorkerGone(res, op, why=f"broke the worker protocol: its reply to {op!r} is not valid ({_first_error(exc)})")


def _first_error(exc: ValidationError) -> str:
    e: Mapping[str, Any] = exc.errors()[0] if exc.errors() else {}
    return f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg', '')}"[:200]
