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
from pathlib import Path
from typing import Any

from kiln.tools.check.channel import ChannelError, ParentChannel
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


def worker_env(spec: JobSpec, cache_dir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The worker's environment: scrubbed, and its temporary files and home inside its own dir (the
    only place it may write: Triton's JIT and nvcc write temporaries)."""
    tmp, home = Path(spec.work_dir) / "tmp", Path(spec.work_dir) / "home"
    for d in (tmp, home):
        d.mkdir(parents=True, exist_ok=True)
    return scrubbed_env(device=spec.device, gpu_index=spec.gpu_index, cache_dir=cache_dir,
                        extra={**(extra or {}), "TMPDIR": str(tmp), "HOME": str(home)})


def worker_confinement(spec: JobSpec, cache_dir: Path) -> Confinement:
    """What a worker may reach (kiln.tools.sandbox.box): read its check's shared dir (problem,
    cases, candidate), write its own dir and, but for the reference (which runs the Proposer's
    case modules), its compile-cache dir."""
    work = Path(spec.work_dir)
    write = [str(work)] + ([str(cache_dir)] if spec.role != "reference" else [])
    write += [spec.profile_dir] if spec.profile_dir else []
    return Confinement(read=(str(work.parent / "shared"),), write=tuple(write))


class WorkerHandle:
    """One running worker and its command channel."""

    def __init__(self, spec: JobSpec, *, env: dict[str, str], zygote: Any, backstop_s: float,
                 confinement: Any = None, sandbox: Any = None) -> None:
        self.spec, self.role = spec, spec.role
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

    def send(self, op: str, **args: Any) -> None:
        nonce = secrets.token_hex(8)  # the reply must carry it: a line written by anyone else is refused
        self.chan.send({"op": op, "id": nonce, **args})
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
                self.kill()
                raise WorkerGone(self._result(), op, timed_out=True)

    def call(self, op: str, deadline: float, **args: Any) -> dict[str, Any]:
        """Send `op` and wait for its reply; a failed command raises CommandFailed. Only with no
        reply outstanding: replies come in order, so an earlier command's would be taken for this one's."""
        if self.pending:
            raise RuntimeError(f"{self.role} worker: call({op!r}) with replies to {[p[0] for p in self.pending]} unread")
        self.send(op, **args)
        return ok(self.recv(deadline))

    def kill(self) -> None:
        self.proc.kill()

    def _result(self) -> ProcResult:
        return self.proc.poll() or self.proc.wait()

    def close(self) -> ProcResult:
        """Ask the worker to exit, then make sure its whole process group is gone."""
        if self.proc.poll() is None:
            with contextlib.suppress(OSError, WorkerGone):
                self.pending.clear()
                self.send("exit")
                self.recv(time.monotonic() + EXIT_WAIT_S)
        if self.proc.poll() is None:
            self.proc.kill()
        self.chan.close()
        return self._result()


def ok(reply: dict[str, Any]) -> dict[str, Any]:
    if not reply.get("ok"):
        err = reply.get("error")
        raise CommandFailed(err if isinstance(err, dict) else {"kind": "protocol", "message": repr(err)[:300]})
    return reply
