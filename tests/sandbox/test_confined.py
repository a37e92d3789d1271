"""A hostile program in a one-shot confined run (the Proposer's cases and the profiler's targets
run this way): each layer alone, and both together, stop every escape in hostile.py."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import uuid
from pathlib import Path

import pytest

from kiln.tools.sandbox import scratch
from kiln.tools.sandbox.box import Sandbox
from kiln.tools.sandbox.confine import Confinement, Plan
from kiln.tools.sandbox.isolation import run_isolated, scrubbed_env
from tests.sandbox.conftest import Planted, assert_contained, gone_within, stage


def layered(box: Sandbox, layers: str) -> Sandbox:
    """The machine's sandbox with only the outer layer, only the inner one, or both."""
    if layers == "outer":
        return dataclasses.replace(box, plan=Plan())
    if layers == "inner":
        return dataclasses.replace(box, bwrap=None)
    return box


def run_hostile(box: Sandbox, planted: Planted, **extra: object) -> tuple[dict, object]:
    check = scratch.root() / f"check-{uuid.uuid4().hex[:8]}"
    work = check / "candidate"
    work.mkdir(parents=True)
    script = stage(check / "shared", planted.targets(**extra))
    conf = Confinement(read=(str(check / "shared"),), write=(str(work),))
    env = scrubbed_env(device="cpu", gpu_index=0, cache_dir=work / "cache")
    res = run_isolated([sys.executable, str(script)], env=env, cwd=work, timeout_s=60, confinement=conf, sandbox=box)
    report = work / "report.json"
    assert report.exists(), f"the hostile program did not report (rc {res.returncode}): {res.stderr_tail}"
    return json.loads(report.read_text()), res


@pytest.mark.parametrize("layers", ["both", "outer", "inner"])
def test_every_escape_fails(box: Sandbox, planted: Planted, layers: str) -> None:
    token = f"31{time.monotonic_ns() % 10**6}.5"
    report, res = run_hostile(layered(box, layers), planted, daemon=token)
    assert res.returncode == 0, res.stderr_tail
    assert_contained(report, planted)
    assert report["subprocess"].startswith("ok") and report["tmp"] == "ok", report  # a worker can still work
    if layers != "outer":  # the inner layer: own PID namespace, no capabilities, no_new_privs
        assert report["pids"] == [1, 2] and report["caps"] == "0000000000000000" and report["no_new_privs"] == "1"
        assert report["kill_init"].startswith("PermissionError"), report["kill_init"]  # Landlock's signal scope
        assert report["own_proc"].startswith("ok"), report["own_proc"]  # what CUDA needs of its own /proc
        assert not report["init_mem"].startswith("ok"), report["init_mem"]  # Landlock's ptrace rule
    assert report["uid"] == 65534
    assert gone_within(token), "a double-forked daemon outlived its worker"


def test_a_killed_run_takes_its_daemon_along(box: Sandbox, planted: Planted) -> None:
    """A run killed at its deadline (not ending on its own) leaves nothing behind either."""
    token = f"32{time.monotonic_ns() % 10**6}.5"
    t0 = time.monotonic()
    check = scratch.root() / f"check-{uuid.uuid4().hex[:8]}"
    work = check / "w"
    work.mkdir(parents=True)
    script = stage(check / "shared", planted.targets(daemon=token, linger_s=300))
    conf = Confinement(read=(str(check / "shared"),), write=(str(work),))
    env = scrubbed_env(device="cpu", gpu_index=0, cache_dir=work / "cache")
    res = run_isolated([sys.executable, str(script)], env=env, cwd=work, timeout_s=3, confinement=conf, sandbox=box)
    assert res.timed_out and time.monotonic() - t0 < 20
    assert gone_within(token), "the daemon of a killed worker survived"


def test_exit_codes_and_signals_come_through(box: Sandbox, tmp_path: Path) -> None:
    env = scrubbed_env(device="cpu", gpu_index=0, cache_dir=tmp_path)
    conf = Confinement(write=(str(tmp_path),))
    code = "import os, signal, sys\nos.kill(os.getpid(), signal.SIGSEGV) if sys.argv[1] == 'segv' else sys.exit(7)"
    segv = run_isolated([sys.executable, "-c", code, "segv"], env=env, cwd=tmp_path, timeout_s=30,
                        confinement=conf, sandbox=box)
    assert segv.signal_name == "SIGSEGV" and segv.returncode == -11, segv
    seven = run_isolated([sys.executable, "-c", code, "exit"], env=env, cwd=tmp_path, timeout_s=30,
                         confinement=conf, sandbox=box)
    assert seven.returncode == 7 and seven.signal_name is None


def test_a_baseline_worker_cannot_reach_the_fork_servers_bytecode(box: Sandbox, planted: Planted) -> None:
    """The baseline runs the problem's own code (a Proposer's, in the curriculum) inside the fork
    server's mount of `zygote/`: Landlock lets it write its compile cache there, never the bytecode the
    server imports at its next start nor the server's HOME (a poisoned .pyc would reach every later worker)."""
    from kiln.tools.check import caches
    from kiln.tools.check.worker import JobSpec
    from kiln.tools.check.workers import worker_confinement

    zyg = caches.root() / "zygote"
    (zyg / "pycache").mkdir(parents=True, exist_ok=True)
    (zyg / "home").mkdir(parents=True, exist_ok=True)
    tag = planted.tag
    planted.writes.update({"zygote_pycache": zyg / "pycache" / f"poisoned-{tag}.pyc",
                           "zygote_home": zyg / "home" / f"poisoned-{tag}", "zygote": zyg / f"poisoned-{tag}"})
    planted.cleanup += [planted.writes[k] for k in ("zygote_pycache", "zygote_home", "zygote")]
    check = scratch.root() / f"check-{uuid.uuid4().hex[:8]}"
    work = check / "baseline"
    work.mkdir(parents=True)
    (work / "report.json").touch()  # a check worker fills files in its own dir, creates none (locked_own)
    script = stage(check / "shared", planted.targets())
    spec = JobSpec(role="baseline", device="cpu", work_dir=str(work))
    conf = worker_confinement(spec, caches.baseline_cache())
    assert str(caches.baseline_cache()) in conf.write
    env = scrubbed_env(device="cpu", gpu_index=0, cache_dir=caches.baseline_cache())
    res = run_isolated([sys.executable, str(script)], env=env, cwd=work, timeout_s=60, confinement=conf,
                       sandbox=layered(box, "inner"))  # the host's tree as the server's mount shows it: Landlock decides
    report = json.loads((work / "report.json").read_text())
    assert res.returncode == 0, res.stderr_tail
    assert_contained(report, planted)
