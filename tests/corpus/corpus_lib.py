"""Read the kernel corpus manifest and run corpus workers in subprocesses.

Other test areas may use `load_manifest` and `expectation_met` to drive kiln's checker over the
corpus; the corpus's own tests use the subprocess helpers to run candidates without kiln.
"""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent
FIXTURES = HERE.parent / "fixtures"
KERNELS = FIXTURES / "kernels"
PROBLEMS = FIXTURES / "problems"
REPO = HERE.parent.parent


def load_manifest() -> list[dict]:
    return json.loads((KERNELS / "MANIFEST.json").read_text())


def entry_id(entry: dict) -> str:
    suffix = f"[{entry['policy']}]" if entry["policy"] != "partial" else ""
    return entry["path"].removesuffix(".py") + suffix


def problem_path(entry: dict) -> Path:
    return PROBLEMS / f"{entry['problem']}.py"


def accepted_statuses(entry: dict) -> set[str]:
    return {entry["expect_status"], *entry.get("accept_status", [])}


def must_fail_hidden_trials(entry: dict) -> bool:
    """A cheat whose output is wrong somewhere in a short hidden run (fresh seeds, x(-1), reused
    module). Timing-only cheats (call counters) are honest for their first calls, so they pass."""
    incorrect = "incorrect" in accepted_statuses(entry)
    return incorrect and not (entry.get("expect_rule") or "").startswith("timing.")


def expectation_met(entry: dict, record: dict) -> tuple[bool, str]:
    """Does a kiln check record (as JSON) meet the manifest entry? Returns (ok, why-not)."""
    status = record.get("status")
    if status not in accepted_statuses(entry):
        return False, f"status {status!r}, expected {sorted(accepted_statuses(entry))}"
    text = json.dumps(record).lower()
    reason = entry.get("expect_reason")
    if reason and reason.lower() not in text:
        return False, f"no {reason!r} in the record"
    rule = entry.get("expect_rule")
    if rule and status == "rejected" and rule not in text:
        return False, f"rejected, but rule {rule!r} is not named"
    return True, ""


def string_constants(path: Path) -> dict[str, str]:
    """Module-level `NAME = "..."` string assignments (CUDA_SRC, HOST_SRC, CPP_SRC), without importing."""
    found = {}
    for node in ast.parse(path.read_text()).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            found[node.targets[0].id] = node.value.value
    return found


@dataclass
class Proc:
    returncode: int | None
    timed_out: bool
    stdout: str
    stderr: str


def run_script(argv: list[str], *, timeout_s: float, env_extra: dict[str, str] | None = None,
               heartbeat: Path | None = None, hang_s: float = 5.0) -> Proc:
    """Run `python argv...` in its own session; on timeout kill the whole process group.

    With `heartbeat`, the run also counts as timed out once that file has existed for `hang_s`
    seconds (the worker writes it just before the call that may hang), so slow start-up on a
    loaded machine is not mistaken for a hang.
    """
    env = {**os.environ, **(env_extra or {})}
    proc = subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=HERE, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    beat_seen: float | None = None
    while proc.poll() is None:
        now = time.monotonic()
        if beat_seen is None and heartbeat is not None and heartbeat.exists():
            beat_seen = now
        if now > deadline or (beat_seen is not None and now - beat_seen > hang_s):
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            return Proc(proc.returncode, True, out, err)
        time.sleep(0.05)
    out, err = proc.communicate()
    return Proc(proc.returncode, False, out, err)


def run_candidates(mode: str, pairs: list[tuple[Path, Path]], out: Path, *,
                   device: str = "cpu", timeout_s: float = 300) -> dict[str, list[dict]]:
    """Run run_candidates.py on (problem, candidate) pairs; returns {candidate path: [trial, ...]}."""
    env = {"TRITON_INTERPRET": "1"} if device == "cpu" else {}
    argv = [str(HERE / "run_candidates.py"), mode, str(out), *(f"{p}={c}" for p, c in pairs)]
    if device != "cpu":
        argv.insert(1, f"--device={device}")
    proc = run_script(argv, timeout_s=timeout_s, env_extra=env)
    if not out.exists():
        raise RuntimeError(f"corpus worker failed (rc={proc.returncode}, timeout={proc.timed_out}):\n"
                           f"{proc.stderr[-3000:]}")
    return json.loads(out.read_text())


def run_parallel(jobs: list, fn, workers: int = 2) -> list:
    """Map fn over jobs on `workers` threads (each job spawns its own subprocess)."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, jobs))
