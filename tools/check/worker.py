"""Worker processes of one check: `python -m kiln.tools.check.worker {reference|candidate} JOB.json`.

The parent (kiln.tools.check) writes a `JobSpec`, starts the worker in a contained subprocess
(kiln.tools.check.isolation) and reads back only files: the result JSON (rewritten atomically after every
step, so a later crash keeps what came before), `torch.save`d outputs, and the heartbeat naming the
stage the parent's deadlines apply to. Nothing is ever read from stdout.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from pydantic import BaseModel, Field

from kiln.tools.check.isolation import beat


class CaseSpec(BaseModel):
    name: str = Field(description="'problem' or the case file's stem")
    path: str = Field(description="file with get_inputs / get_init_inputs")
    model_path: str = Field(description="file with the reference Model (the case's own, or the problem's)")


class JobSpec(BaseModel):
    """Everything a worker needs, written by the parent as JSON."""

    role: Literal["reference", "candidate", "peaks"]
    candidate: str | None = None
    cases: list[CaseSpec]
    dtype: str = "fp32"
    device: str = "cpu"
    secret: int
    trials: int = 5
    # tolerance (issue 16): kiln.tools.inputs.DISTRIBUTIONS's names (not imported: it imports torch)
    distributions: list[str] = Field(default_factory=lambda: ["x1", "x3", "x0.01", "neg", "x1000", "x0.001", "heavy"])
    work_dir: str
    cache_root: str
    policy: str = "partial"
    atol: float = 1e-4
    rtol: float = 1e-4
    numerics: bool = Field(True, description="judge by the numerics rule (kiln.tools.tolerance); False when "
                                             "--atol/--rtol were given: atol/rtol decide")
    time: bool = True
    baselines: list[str] = Field(default_factory=list)
    timing_max_s: float = 60.0
    speedup_threshold: float = 1.0
    integrity: bool = True
    gpu_index: int = 0
    reference_cache: str | None = Field(None, description="JSON file caching the problem-only integrity facts")
    parent_pid: int | None = Field(None, description="workers waiting on the parent give up if it dies")
    profile_dir: str | None = Field(None, description="dump a cProfile of the worker here (KILN_PROFILE_WORKERS)")

    @property
    def result_path(self) -> Path:
        return Path(self.work_dir) / "result.json"

    @property
    def heartbeat(self) -> Path:
        return Path(self.work_dir) / "heartbeat.json"

    @property
    def decision_path(self) -> Path:
        return Path(self.work_dir) / "decision.json"

    def output_path(self, case: str, dist: str, trial: int, phase: str = "") -> Path:
        return Path(self.work_dir) / "out" / f"{case}.{dist}.{trial}{'.' + phase if phase else ''}.pt"


TRACE_MAX = 400


class Results:
    """The worker's result file: a dict rewritten atomically after each step."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.data: dict[str, Any] = {"role": spec.role, "stages": {}, "trials": [], "trace": []}

    def stage(self, name: str, detail: str = "") -> None:
        beat(self.spec.heartbeat, name, detail)
        now = time.time()
        self.data["stages"].setdefault(name, [now, None])
        if len(self.data["trace"]) < TRACE_MAX:  # where the worker spent its time, step by step
            self.data["trace"].append([round(now, 4), name, detail])

    def end_stage(self, name: str) -> None:
        if name in self.data["stages"]:
            self.data["stages"][name][1] = time.time()
        self.save()

    def save(self) -> None:
        tmp = self.spec.result_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, default=str))
        os.replace(tmp, self.spec.result_path)

    def fail(self, kind: str, exc: BaseException, where: str) -> None:
        """Record an exception: `kind` is 'input' (the problem's fault) or 'candidate' / 'reference'."""
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])
        self.data["error"] = {"kind": kind, "where": where, "message": f"{type(exc).__name__}: {exc}",
                              "traceback": tb[-3000:]}
        self.save()


def load_module(path: str, tag: str) -> ModuleType:
    """Import a problem or case file from its real path under a unique name."""
    name = f"kiln_{tag}_{abs(hash(path)) % 10**8}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def save_output(path: Path, packed: dict[str, Any]) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(packed, path)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    spec = JobSpec.model_validate_json(Path(argv[1]).read_text())
    beat(spec.heartbeat, "start")
    if argv[0] == "reference":
        from kiln.tools.check.reference import run
    elif argv[0] == "peaks":
        from kiln.tools.check.reference import run_peaks as run
    else:
        from kiln.tools.check.candidate import run
    if spec.profile_dir:
        _profiled(run, spec)
    else:
        run(spec)
    return 0


def _profiled(run: Any, spec: JobSpec) -> None:
    """Run the worker under cProfile and dump the stats as DIR/ROLE-PID.pstats (a developer's tool)."""
    import cProfile
    import shutil

    prof = cProfile.Profile()
    out = Path(spec.profile_dir or ".")
    try:
        prof.runcall(run, spec)
    finally:
        out.mkdir(parents=True, exist_ok=True)
        prof.dump_stats(str(out / f"{spec.role}-{os.getpid()}.pstats"))
        if spec.result_path.exists():  # its step-by-step trace, kept after the work dir is gone
            shutil.copy(spec.result_path, out / f"{spec.role}-{os.getpid()}.result.json")


def _exit_now(code: int) -> None:
    """Leave without interpreter teardown: after a CUDA error the context is poisoned and torch's
    exit handlers can hang; every result is already on disk."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit_now(main())
