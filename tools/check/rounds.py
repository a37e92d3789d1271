"""One round of a check: start the reference and candidate workers side by side, compare the
candidate's correctness outputs with the reference's as soon as both exist, tell the candidate
whether to go on (integrity, timing), and collect everything the workers left in their files."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kiln.tools import pyparse
from kiln.tools.check.isolation import (
    IsolatedProc,
    ProcResult,
    default_as_limit,
    scrubbed_env,
    start_isolated,
)
from kiln.tools.check.worker import JobSpec

POLL_S = 0.01


@dataclass
class Round:
    """What a round produced, for `merge` to turn into records."""

    ref: ProcResult
    ref_data: dict[str, Any]
    cand: ProcResult
    cand_data: dict[str, Any]
    ref_spec: JobSpec
    cand_spec: JobSpec
    cand_started_wall: float
    comparison: Any = None  # compare.Comparison, filled when correctness outputs were compared
    notes: list[str] = field(default_factory=list)


def read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def write_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _start(spec: JobSpec, *, env: dict[str, str], timeout_s: float, stages: dict[str, float] | None,
           untimed: tuple[str, ...] = (), zygote: Any = None) -> IsolatedProc:
    work = Path(spec.work_dir)
    (work / "out").mkdir(parents=True, exist_ok=True)
    job = work / "job.json"
    job.write_text(spec.model_dump_json())
    argv = [sys.executable, "-m", "kiln.tools.check.worker", spec.role, str(job)]
    return start_isolated(argv, env=env, cwd=work, timeout_s=timeout_s, heartbeat=spec.heartbeat,
                          stage_timeouts=stages, as_limit_bytes=default_as_limit(spec.device),
                          untimed_stages=untimed, zygote=zygote)


def start_worker(spec: JobSpec, cache_root: Path, cand_key: str, timeout_s: float) -> IsolatedProc:
    """One worker on its own (e.g. the `peaks` role), forked from the fork server when there is one."""
    return _start(spec, env=worker_env(spec, cache_root, cand_key), timeout_s=timeout_s, stages=None,
                  zygote=fork_server(spec, cache_root))


def worker_env(spec: JobSpec, cache_root: Path, cand_key: str) -> dict[str, str]:
    return scrubbed_env(device=spec.device, gpu_index=spec.gpu_index, cache_dir=cache_root / "cand" / cand_key,
                        extra={"TORCHINDUCTOR_CACHE_DIR": str(cache_root / "inductor")})


def fork_server(spec: JobSpec, cache_root: Path) -> Any:
    """The process-wide fork server for this device (None: fall back to a fresh interpreter)."""
    return fork_server_for(spec.device, spec.gpu_index, cache_root)


def fork_server_for(device: str, gpu_index: int, cache_root: Path) -> Any:
    from kiln.tools.check.zygote import get_zygote

    return get_zygote((device, gpu_index, sys.executable), zygote_env(device, gpu_index, cache_root))


def warm_fork_servers(device: str, gpu_indices: list[int], cache_root: Path) -> list[threading.Thread]:
    """Start the fork servers of these GPUs now, side by side, in background threads: a batch's
    first checks then find them running instead of each waiting seconds for its own."""
    threads = [threading.Thread(target=fork_server_for, args=(device, g, cache_root), daemon=True)
               for g in gpu_indices]
    for t in threads:
        t.start()
    return threads


def zygote_env(device: str, gpu_index: int, cache_root: Path) -> dict[str, str]:
    """The fork server's environment: a worker's, except that the server (kiln's and torch's code
    only) may write the bytecode cache, so its next start does not compile torch's Python again
    where an install shipped none; the workers it forks write none (`zygote._child`)."""
    env = scrubbed_env(device=device, gpu_index=gpu_index, cache_dir=cache_root / "zygote")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


PARENT_MODULES = ("torch", "kiln.tools.integrity.verdict")


def _preimport_torch() -> None:
    """The parent needs torch (to compare outputs) and the verdict (physics imports torch's flop
    counter): import them in a thread while the workers start, not after."""
    if not all(m in sys.modules for m in PARENT_MODULES):
        threading.Thread(target=_import_parent_modules, daemon=True).start()


def _import_parent_modules() -> None:
    with pyparse.LOCK:  # torch's import parses source: never beside another thread's parse
        for name in PARENT_MODULES:
            importlib.import_module(name)


def run_round(ref_spec: JobSpec, cand_spec: JobSpec, *, cache_root: Path, cand_key: str,
              stage_timeouts: dict[str, float], timeout_s: float, comparer: Any, use_fork_server: bool = True
              ) -> Round:
    """Run both workers. `comparer` (compare.RoundComparer) compares trials as both sides
    finish them; a failure tells the candidate to stop its trials; when every trial passed, the
    candidate goes on to integrity checks and timing."""
    _preimport_torch()
    cand_wall = time.time()  # spawn time includes starting the fork server when this check did
    zygote = fork_server(cand_spec, cache_root) if use_fork_server else None
    ref = _start(ref_spec, env=worker_env(ref_spec, cache_root, cand_key), timeout_s=timeout_s, stages=None,
                 zygote=zygote)
    cand = _start(cand_spec, env=worker_env(cand_spec, cache_root, cand_key), timeout_s=timeout_s,
                  stages=stage_timeouts, untimed=("await",), zygote=zygote)
    try:
        ref_res, cand_res = _until_compare_point(ref, cand, ref_spec, cand_spec, comparer)
        ref_data = read_json(ref_spec.result_path)
        comparison = None
        if (ref_res is not None and ref_res.returncode != 0) or ref_data.get("error"):
            cand.kill()  # a broken problem: the candidate's result would mean nothing
        else:
            cand_data = read_json(cand_spec.result_path)
            if cand_data.get("correctness_done") or comparer.failed:
                try:
                    comparer.feed(ref_data, cand_data)
                    comparison = comparer.finish(cand_data)
                except Exception:  # noqa: BLE001 - no go; the merge step reports what went wrong
                    comparison = None
        go = bool(comparison and comparison.passed)
        if go and cand_spec.device == "cuda" and cand_spec.time:
            ref_res = ref_res or ref.wait()  # nothing else on the GPU while the candidate is timed
        write_atomic(cand_spec.decision_path, {"go": go})
        cand_res = cand_res or cand.wait()
        ref_res = ref_res or ref.wait()
    finally:
        for proc in (ref, cand):
            if proc.result is None:
                proc.kill()
    return Round(ref=ref_res, ref_data=read_json(ref_spec.result_path), cand=cand_res,
                 cand_data=read_json(cand_spec.result_path), ref_spec=ref_spec, cand_spec=cand_spec,
                 cand_started_wall=cand_wall, comparison=comparison)


class _Watch:
    """Re-reads a worker's result file only when it changed."""

    def __init__(self, path: Path) -> None:
        self.path, self.mtime = path, -1
        self.data: dict[str, Any] = {}

    def changed(self) -> bool:
        try:
            m = self.path.stat().st_mtime_ns
        except OSError:
            return False
        if m == self.mtime:
            return False
        self.mtime, self.data = m, read_json(self.path)
        return True


def _until_compare_point(ref: IsolatedProc, cand: IsolatedProc, ref_spec: JobSpec, cand_spec: JobSpec,
                         comparer: Any) -> tuple[ProcResult | None, ProcResult | None]:
    """Poll both until the reference's trial outputs exist (its integrity stage may still run) and
    the candidate has ended or awaits the verdict, comparing trials on the way; the first failing
    trial tells the candidate to stop (its decision file says no go)."""
    ref_w, cand_w = _Watch(ref_spec.result_path), _Watch(cand_spec.result_path)
    told = False
    while True:
        ref_res, cand_res = ref.poll(), cand.poll()
        ref_ready = ref_res is not None or ref.stage == "integrity"
        if ref_res is not None and ref_res.returncode != 0:
            return ref_res, cand_res
        if ref_ready and (cand_res is not None or cand.stage == "await"):
            return ref_res, cand_res
        if (ref_w.changed() | cand_w.changed()) and ref_w.data and cand_w.data:
            with contextlib.suppress(Exception):  # compared again (and reported) at the end
                comparer.feed(ref_w.data, cand_w.data)
            if comparer.failed and not told:
                write_atomic(cand_spec.decision_path, {"go": False})
                told = True
        time.sleep(POLL_S)
