"""Starting and stopping runs from the UI (only with `kiln ui --allow-control`).

A run is started as `kiln run PROBLEM --out ROOT/ui-runs/NAME` in its own session, with the UI's
environment (kiln's own config precedence picks the LLM: a config file, `KILN_RUN_*`, else builtin).
Only runs this server started can be stopped: Ctrl-C (SIGINT) to the run's process group, so the run
ends resumable, then SIGKILL if it has not exited within a grace period."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from kiln.evals.ui.roots import Refused, Roots

GRACE_S = 20.0


class StartRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    problem: str = Field(description="id of a problem file inside a served folder")
    strategy: str = Field("linear", pattern="^(linear|beam|mcts)$")
    max_iters: int = Field(8, ge=1, le=100)
    device: str = Field("auto", pattern="^(auto|cuda|cpu)$")


class Control:
    def __init__(self, roots: Roots) -> None:
        self.roots = roots
        self.procs: dict[Path, subprocess.Popen] = {}
        self._lock = threading.Lock()

    def start(self, req: StartRequest) -> Path:
        problem = self.roots.resolve(req.problem)
        if not problem.is_file() or problem.suffix != ".py":
            raise Refused(req.problem)
        out = self.roots.folders[0] / "ui-runs" / f"{problem.stem}-{time.strftime('%Y%m%d-%H%M%S')}"
        out.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "kiln.evals.cli", "run", str(problem), "--out", str(out), "--quiet",
               "--strategy", req.strategy, "--max-iters", str(req.max_iters), "--device", req.device]
        log = (out.parent / f"{out.name}.log").open("w")
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        with self._lock:
            self.procs[out.resolve()] = proc
        return out

    def running(self, run: Path) -> bool:
        proc = self.procs.get(run.resolve())
        return proc is not None and proc.poll() is None

    def stop(self, run: Path) -> int | None:
        """SIGINT to the run's process group, then SIGKILL after the grace period; its exit code."""
        proc = self.procs.get(run.resolve())
        if proc is None:
            raise Refused(str(run))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        return proc.returncode

    def close(self) -> None:
        for run in list(self.procs):
            if self.running(run):
                self.stop(run)
