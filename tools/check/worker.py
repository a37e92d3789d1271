"""Worker processes of one check: `python -m kiln.tools.check.worker ROLE JOB.json`.

Roles: `reference` (the problem's Model: inputs, reference outputs, the work count), `candidate`
(ModelNew: compile, trials, runtime evidence, timing) and `baseline` (the problem's Model timed as
eager / eager+TF32 / torch.compile, in a process that never imported the candidate).

The parent (kiln) writes a `JobSpec`, starts the worker in a contained subprocess and then drives
it: one command at a time over `kiln.tools.check.channel`, one reply per command, each a typed
record (`kiln.tools.check.messages`). The candidate's worker holds no verdict and no secret: it
runs what it is told and reports; the reference worker judges outputs against its own; the parent
times, bounds and decides. Bulky data goes through files whose paths the parent chose and, for the
candidate's outputs, created beforehand (`kiln.tools.check.outputs`).
"""

from __future__ import annotations

import importlib
import os
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from kiln.tools import files

Role = Literal["reference", "candidate", "baseline"]


class CaseSpec(BaseModel):
    name: str = Field(description="'problem' or the case file's stem")
    path: str = Field(description="file with get_inputs / get_init_inputs (a copy in the check's shared dir)")
    model_path: str = Field(description="file with the reference Model (the case's own, or the problem's)")


class JobSpec(BaseModel):
    """What a worker is started with (written by the parent as JSON). No secret seed: seeds and keys
    arrive with the commands that need them."""

    role: Role
    candidate: str | None = Field(None, description="the candidate file (a copy in the check's shared dir)")
    cases: list[CaseSpec] = Field(default_factory=list)
    dtype: str = "fp32"
    device: str = "cpu"
    work_dir: str
    feed_dir: str = Field("", description="where a reference worker writes weights and small inputs (its cases' own dir)")
    cache_root: str = Field("", description="the candidate's own compile-cache dir (per source hash)")
    gpu_index: int = 0
    profile_dir: str | None = Field(None, description="dump a cProfile of the worker here (KILN_PROFILE_WORKERS)")


class WorkerError(Exception):
    """A command failed in a way the worker can describe: `kind` says whose fault it is."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def load_module(path: str, tag: str) -> ModuleType:
    """Import a problem, case or candidate file from its path under a unique module name."""
    return files.load_module(path, f"kiln_{tag}_{abs(hash(path)) % 10**8}")


def sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def error_message(exc: BaseException) -> str:
    """`Type: text`, with the one torch failure whose text misleads said plainly.

    When the CUDA caching allocator runs out of memory it lists the GPU's processes through NVML
    for its message; inside the sandbox (another uid, a pid namespace) NVML refuses, and torch
    raises `NVML_SUCCESS == r INTERNAL ASSERT FAILED` instead of its out-of-memory error.
    """
    text = f"{type(exc).__name__}: {exc}"
    if "NVML_SUCCESS == r" in text and "CUDACachingAllocator" in text:
        return (f"torch.OutOfMemoryError: CUDA out of memory: it could not allocate what it asked for{_free_memory()} "
                "(torch's allocator raised an internal "
                "assert because NVML may not list the GPU's processes inside kiln's sandbox)")
    return text


def _free_memory() -> str:
    try:
        import torch

        free, total = torch.cuda.mem_get_info()
        return f" ({free / 2**30:.1f} GiB free of {total / 2**30:.1f} GiB)"
    except Exception:  # noqa: BLE001 - the message stands without the figure
        return ""


def error_reply(exc: BaseException, kind: str, where: str) -> dict[str, Any]:
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])
    return {"ok": False, "error": {"kind": kind, "where": where, "message": error_message(exc),
                                   "traceback": tb[-3000:]}}


class Worker:
    """Base of the roles: `op_<name>(cmd)` handles command `name` (a `messages` record) and returns
    its reply record (or None for a bare `Reply`)."""

    blame = "worker"  # whose fault an unexpected exception is: 'candidate', 'reference', ...

    def __init__(self, spec: JobSpec) -> None:
        from kiln.tools.check.messages import COMMANDS

        self.spec = spec
        self.commands = COMMANDS[spec.role]
        # the handlers, bound now, before any candidate code is imported: a candidate that later
        # replaces a method on the class (or the class in sys.modules) changes nothing kiln calls
        self.ops = {name[3:]: getattr(self, name) for name in dir(type(self)) if name.startswith("op_")}

    def handle(self, raw: dict[str, Any]) -> dict[str, Any]:
        nonce = raw.pop("id", None)
        return {**self._handle(raw), "id": nonce}

    def _handle(self, raw: dict[str, Any]) -> dict[str, Any]:
        op = str(raw.get("op", ""))
        try:
            cmd = self.commands.validate_python(raw)
        except ValidationError as exc:
            return {"ok": False, "error": {"kind": "protocol", "where": op, "message": f"bad command {op!r}: "
                                                                                        f"{str(exc)[:300]}"}}
        t0 = time.perf_counter()
        try:
            out = self.ops[op](cmd)
        except WorkerError as exc:
            return {"ok": False, "error": {"kind": exc.kind, "where": op, "message": str(exc), "traceback": ""}}
        except Exception as exc:  # noqa: BLE001 - every failure is a reply for the parent to judge
            return error_reply(exc, self.blame, op)
        body = out.model_dump(mode="json") if out is not None else {}
        return {**body, "ok": True, "worker_s": round(time.perf_counter() - t0, 6)}

    def op_exit(self, cmd: Any) -> None:
        return None


class LapSteps:
    """A role that runs the timing harness (`kiln.tools.timing.laps`) on one ring, `self.ring` =
    (the function timed, its Ring): the candidate's worker, and the reference worker when the parent
    times the steps again (the baseline worker keeps one ring per baseline)."""

    ring: Any = None

    def op_refresh(self, cmd: Any) -> None:
        self.ring[1].refresh(cmd.key)

    def op_lap(self, cmd: Any) -> None:
        from kiln.tools.timing.laps import run_lap

        run_lap(*self.ring)

    def op_commit(self, cmd: Any) -> Any:
        from kiln.tools.check import messages as m
        from kiln.tools.timing.laps import commit

        ring = self.ring[1]
        out = m.CommitReply(projections=[{"leaves": p} for p in commit(ring, cmd.key, cmd.sigma)])
        ring.outputs = []
        return out


class _ReadOnlyModule(type(sys)):  # type: ignore[misc]
    """A kiln module inside a worker: attribute assignment and deletion are refused."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, ModuleType) and name not in self.__dict__:  # the import system binding a submodule
            type(sys).__setattr__(self, name, value)
            return
        raise AttributeError(f"kiln's module {self.__name__} is read-only inside a check worker")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"kiln's module {self.__name__} is read-only inside a check worker")


def freeze_kiln_modules() -> None:
    """Make every kiln module imported so far read-only to attribute assignment (`mod.f = evil`),
    before the candidate is imported: defence in depth against patching kiln's functions inside the
    candidate's worker (code that writes a module's __dict__ directly, or native code, is out of
    reach: docs/integrity.md). kiln's own code never assigns module attributes at run time."""
    for name, mod in list(sys.modules.items()):
        if name.startswith("kiln.") and type(mod) is type(sys):
            mod.__class__ = _ReadOnlyModule


def _roles() -> dict[str, str]:
    return {"reference": "kiln.tools.check.reference:ReferenceWorker",
            "candidate": "kiln.tools.check.candidate:CandidateWorker",
            "baseline": "kiln.tools.check.baseline:BaselineWorker"}


def make_worker(spec: JobSpec) -> Worker:
    from kiln.tools import interpreter

    interpreter.install()  # on a CPU (TRITON_INTERPRET=1): before any kernel, and before kiln is frozen
    module, cls = _roles()[spec.role].split(":")
    worker = getattr(importlib.import_module(module), cls)(spec)
    if spec.role == "candidate":
        freeze_kiln_modules()
    return worker


def serve(spec: JobSpec) -> None:
    """Answer the parent's commands until `exit`, or until the process that started us is gone."""
    from kiln.tools.check.channel import WorkerChannel

    worker = make_worker(spec)
    chan = WorkerChannel(Path(spec.work_dir))
    parent = os.getppid()
    while True:
        try:
            cmd = chan.next_command(1.0)
        except EOFError:
            return
        if cmd is None:
            if os.getppid() != parent:  # the fork server (or kiln) died: nobody will read a reply
                return
            continue
        op = cmd.get("op")
        chan.reply(worker.handle(cmd))
        if _PROFILE:  # a developer's profile survives the worker being killed at close
            _PROFILE[0]()
        if op == "exit":
            return


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    spec = JobSpec.model_validate_json(Path(argv[1]).read_text())
    if spec.profile_dir:
        _profiled(spec)
    else:
        serve(spec)
    return 0


_PROFILE: list[Any] = []
"""With KILN_PROFILE_WORKERS: the function that writes this worker's profile so far (after each reply:
a worker is killed at close, so nothing written at exit would survive)."""


def _profiled(spec: JobSpec) -> None:
    """Serve under cProfile and dump the stats as DIR/ROLE-PID.pstats (a developer's tool)."""
    import cProfile

    prof = cProfile.Profile()
    out = Path(spec.profile_dir or ".")
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{spec.role}-{os.getpid()}.pstats"

    def dump() -> None:
        prof.dump_stats(str(path) + ".tmp")  # stops the profiler (create_stats): on again after
        os.replace(str(path) + ".tmp", path)
        prof.enable()

    _PROFILE.append(dump)
    prof.enable()
    try:
        serve(spec)
    finally:
        prof.disable()


def _exit_now(code: int) -> None:
    """Leave without interpreter teardown: after a CUDA error the context is poisoned and torch's
    exit handlers can hang; every reply is already sent."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit_now(main())
