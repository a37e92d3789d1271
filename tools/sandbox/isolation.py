"""Run untrusted code in a fresh, contained subprocess.

* `scrubbed_env`: an allowlisted environment (no API keys, tokens or provider variables), the GPU
  pinned, per-candidate Triton cache, `TRITON_INTERPRET=1` on CPU.
* `start_isolated` / `IsolatedProc.poll` / `run_isolated`: a worker forked by the fork server
  (`zygote`) or exec'd here, contained by the OS sandbox when given a `Confinement` and a `Sandbox`
  (`kiln.tools.sandbox.confine`, `kiln.tools.sandbox.box`), else in a new session (`setsid`) so its
  whole process group (ninja, nvcc, ...) can be killed; rlimits (no core files, bounded open files,
  an address-space cap only when asked: CUDA reserves huge virtual ranges, see NOTES.md); stdout
  and stderr go to files (never a pipe that can fill up); per-stage deadlines enforced here, in the
  parent, by reading the heartbeat file the worker rewrites at each stage (`beat`). A sandboxed
  worker's pid is not kiln's to signal (another PID namespace): kills go through the fork server
  (or kill the launcher's bubblewrap), exit codes come from status files in kiln's control dir.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from kiln.tools.files import write_atomic
from kiln.tools.sandbox.procs import Forked, Popened, _limits, pid_alive  # noqa: F401 - kiln's names for them

ALLOW = {
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SHELL",
    "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "PYTHONPATH",
    "VIRTUAL_ENV", "CONDA_PREFIX", "CC", "CXX", "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NVIDIA_DRIVER_CAPABILITIES", "TRITON_PTXAS_PATH",
    "TRITON_LIBCUDA_PATH", "MAX_JOBS", "KILN_CACHE_DIR", "XDG_CACHE_HOME",
}
DENY = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|^(OPENAI|ANTHROPIC|AZURE|AWS|GOOGLE|"
                  r"GEMINI|HF|HUGGING|MISTRAL|COHERE|GROQ|TOGETHER|DEEPSEEK|LANGCHAIN|LANGSMITH|GITHUB|GH)_")
TAIL_CHARS = 4000


def scrubbed_env(*, device: str, gpu_index: int, cache_dir: Path,
                 extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a worker: allowlisted names only, never anything that looks like a secret."""
    env = {k: v for k, v in os.environ.items() if k in ALLOW and not DENY.search(k)}
    env.update({
        "PYTHONUNBUFFERED": "1", "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1",
        "TRITON_CACHE_DIR": str(Path(cache_dir) / "triton"),
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        # inductor compiles the torch.compile baseline in-process: no pool of compile-worker
        # processes importing torch beside the timed calls (or holding up their shutdown)
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
    })
    if device == "cpu":
        env.update({"CUDA_VISIBLE_DEVICES": "", "TRITON_INTERPRET": "1"})
    else:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu_index)
    for k, v in (extra or {}).items():
        if not DENY.search(k):
            env[k] = v
    return env


class ProcResult(BaseModel):
    """How a worker process ended."""

    returncode: int | None = None
    timed_out: bool = False
    stage: str | None = Field(None, description="last stage the worker announced in its heartbeat")
    detail: str = Field("", description="what the worker was doing in that stage (e.g. the trial)")
    stderr_tail: str = ""
    wall_s: float = 0.0
    signal_name: str | None = Field(None, description="SIGSEGV, SIGKILL, ... when killed by a signal")
    timeout_reason: str | None = None


def beat(path: Path | str, stage: str, detail: str = "") -> None:
    """Worker side: announce the current stage (atomic rewrite, read by the parent)."""
    write_atomic(path, json.dumps({"stage": stage, "detail": detail, "t": time.time()}))


def read_beat(path: Path | None) -> dict:
    if path is None:
        return {}
    try:
        data = json.loads(read_regular(path, 1 << 16))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def read_regular(path: Path | str, max_bytes: int, *, tail_only: bool = False) -> bytes:
    """At most `max_bytes` of a file a worker could have touched: never through a symlink, never
    from a FIFO or device (the open cannot block), only a regular file; with `tail_only`, its last
    `max_bytes`. OSError otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path}: not a regular file")
        if tail_only and st.st_size > max_bytes:
            os.lseek(fd, st.st_size - max_bytes, os.SEEK_SET)
        return os.read(fd, max_bytes)
    finally:
        os.close(fd)


class IsolatedProc:
    """A running worker. `poll()` enforces deadlines; returns a ProcResult once it has ended.

    `confinement` (what it may read and write) and `sandbox` (`kiln.tools.sandbox.box.Sandbox`)
    contain it: a forked worker contains itself in the fork server, which the sandbox started; an
    exec'd one runs through the sandbox's one-shot launcher."""

    def __init__(self, argv: list[str], *, env: dict[str, str], cwd: Path, timeout_s: float,
                 heartbeat: Path | None, stage_timeouts: dict[str, float] | None,
                 as_limit_bytes: int | None, untimed_stages: tuple[str, ...], zygote: Any = None,
                 confinement: Any = None, sandbox: Any = None) -> None:
        self.heartbeat, self.stage_timeouts = heartbeat, dict(stage_timeouts or {})
        self.timeout_s, self.untimed = timeout_s, set(untimed_stages)
        # kiln's control dir, which no worker may write: the worker holds its stderr open for
        # writing, but cannot put a link to some other file in its place for kiln to read back
        from kiln.tools.sandbox import scratch

        self.stderr_path = scratch.ctl_dir() / f"stderr.{os.getpid()}.{time.monotonic_ns()}.log"
        self.start_wall = time.time()
        self.t0 = self.stage_t0 = time.monotonic()
        self.untimed_s, self.stage, self.detail = 0.0, None, ""
        self.result: ProcResult | None = None
        self.proc: Forked | Popened
        if zygote is not None and argv[1:2] == ["-m"]:  # `python -m MODULE ARGS`: MODULE.main(ARGS), forked
            conf = confinement.as_dict() if confinement is not None else None
            self.proc = Forked(zygote, f"{argv[2]}:main", argv[3:], env, Path(cwd), self.stderr_path,
                               as_limit_bytes, conf)
            return
        self.proc = Popened(argv, env, Path(cwd), self.stderr_path, as_limit_bytes, sandbox, confinement)

    def _track_stage(self, now: float) -> None:
        info = read_beat(self.heartbeat)
        stage = info.get("stage")
        if stage and stage != self.stage:
            if self.stage in self.untimed:
                self.untimed_s += now - self.stage_t0
            self.stage, self.stage_t0 = stage, now
        self.detail = info.get("detail", self.detail)

    def _deadline_reason(self, now: float) -> str | None:
        if self.stage in self.untimed:
            return None
        limit = self.stage_timeouts.get(self.stage or "")
        if limit is not None and now - self.stage_t0 > limit:
            return f"stage '{self.stage}' exceeded its {limit:.0f} s timeout"
        if now - self.t0 - self.untimed_s > self.timeout_s:
            return f"exceeded the {self.timeout_s:.0f} s timeout"
        return None

    def poll(self) -> ProcResult | None:
        if self.result is not None:
            return self.result
        now = time.monotonic()
        self._track_stage(now)
        if self.proc.poll() is not None:
            return self._finish(timed_out=False, reason=None)
        reason = self._deadline_reason(now)
        if reason:
            self.kill()
            return self._finish(timed_out=True, reason=reason)
        return None

    def kill(self) -> None:
        self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)

    def _finish(self, *, timed_out: bool, reason: str | None) -> ProcResult:
        # kill stragglers (ninja, nvcc, daemons) even on a clean exit: its namespace, else its group
        self.proc.kill()
        self._track_stage(time.monotonic())
        rc = self.proc.returncode
        self.result = ProcResult(
            returncode=rc, timed_out=timed_out, stage=self.stage, detail=self.detail,
            stderr_tail=tail(self.stderr_path), wall_s=time.monotonic() - self.t0,
            signal_name=signal.Signals(-rc).name if rc is not None and rc < 0 and not timed_out else None,
            timeout_reason=reason,
        )
        with contextlib.suppress(OSError):  # its tail is kept: the file (RAM, up to RLIMIT_FSIZE) goes now
            os.unlink(self.stderr_path)
        return self.result

    def stderr_bytes(self) -> int:
        """How much the worker has written to its stderr so far."""
        try:
            return os.stat(self.stderr_path).st_size
        except OSError:
            return 0

    def wait(self, interval_s: float = 0.02) -> ProcResult:
        while (res := self.poll()) is None:
            time.sleep(interval_s)
        return res


def tail(path: Path, n_chars: int = TAIL_CHARS) -> str:
    try:
        return read_regular(path, n_chars, tail_only=True).decode("utf-8", "replace")
    except OSError:
        return ""


def start_isolated(argv: list[str], *, env: dict[str, str], cwd: Path, timeout_s: float,
                   heartbeat: Path | None = None, stage_timeouts: dict[str, float] | None = None,
                   as_limit_bytes: int | None = None, untimed_stages: tuple[str, ...] = (),
                   zygote: Any = None, confinement: Any = None, sandbox: Any = None) -> IsolatedProc:
    """Start a worker without waiting (the check runs the reference and candidate side by side).
    With a fork server (`kiln.tools.sandbox.zygote.Zygote`), `python -m MODULE ...` is forked from
    it instead of exec'd: same containment, no import cost."""
    return IsolatedProc(argv, env=env, cwd=cwd, timeout_s=timeout_s, heartbeat=heartbeat,
                        stage_timeouts=stage_timeouts, as_limit_bytes=as_limit_bytes,
                        untimed_stages=untimed_stages, zygote=zygote, confinement=confinement, sandbox=sandbox)


def run_isolated(argv: list[str], *, env: dict[str, str], cwd: Path, timeout_s: float,
                 heartbeat: Path | None = None, stage_timeouts: dict[str, float] | None = None,
                 as_limit_bytes: int | None = None, confinement: Any = None, sandbox: Any = None) -> ProcResult:
    """Run a worker to completion (or to its deadline, then kill it and all it started)."""
    return start_isolated(argv, env=env, cwd=cwd, timeout_s=timeout_s, heartbeat=heartbeat,
                          stage_timeouts=stage_timeouts, as_limit_bytes=as_limit_bytes,
                          confinement=confinement, sandbox=sandbox).wait()


def default_as_limit(device: str) -> int | None:
    """RLIMIT_AS for a worker: 3/4 of host memory on CPU; none with CUDA (it reserves huge virtual
    ranges and an 8 GiB cap breaks its start-up; host memory there is a cgroup's job)."""
    if device != "cpu":
        return None
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None
    return max(4 << 30, int(pages * size * 3 // 4))
