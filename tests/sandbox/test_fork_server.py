"""The check's hot path: a hostile candidate imported by a worker that the sandboxed fork server
forked. It sits next to a reference worker's dir in the same check and inside kiln's cache, yet
reaches neither, nor $HOME, the project, the network, kiln's environment or the server itself."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from kiln.tools.check import caches
from kiln.tools.check.messages import CandCompile
from kiln.tools.check.servers import fork_server_for
from kiln.tools.check.worker import JobSpec
from kiln.tools.check.workers import WorkerGone, WorkerHandle, worker_confinement, worker_env
from kiln.tools.sandbox.box import Sandbox
from tests.sandbox.conftest import Planted, assert_contained, gone_within, report_of, stage


@pytest.fixture(scope="module")
def server(box: Sandbox):
    z = fork_server_for("cpu", 0, caches.root(), box)
    assert z is not None and z.confined, "the sandboxed fork server did not start"
    return z


def start_candidate(box: Sandbox, server, planted: Planted, device: str = "cpu",
                    **extra: object) -> tuple[WorkerHandle, Path]:
    check = planted.sibling.parent  # the same check dir as the planted reference outputs
    stage(check / "shared", planted.targets(server_pid=server.proc.pid, **extra))
    cache = caches.candidate_cache(uuid.uuid4().hex)
    planted.cleanup.append(cache)
    spec = JobSpec(role="candidate", candidate=str(check / "shared" / "hostile.py"), device=device,
                   work_dir=str(check / "candidate"), cache_root=str(cache))
    (check / "candidate").mkdir(parents=True, exist_ok=True)
    (check / "candidate" / "report.json").touch()  # for hostile.py to fill: it may not create files there
    h = WorkerHandle(spec, env=worker_env(spec, cache), zygote=server, backstop_s=120,
                     confinement=worker_confinement(spec, cache), sandbox=box)
    return h, check / "candidate"


def test_a_forked_candidate_reaches_nothing(box: Sandbox, server, planted: Planted) -> None:
    token = f"33{time.monotonic_ns() % 10**6}.5"
    h, work = start_candidate(box, server, planted, daemon=token)
    try:
        reply = h.call(CandCompile(), time.monotonic() + 120)
    finally:
        res = h.close()
    assert reply.compile.ok, reply
    report = json.loads(report_of(work).read_text())
    assert_contained(report, planted)
    assert report["pids"] == [1, 2] and report["uid"] == 65534 and report["caps"] == "0000000000000000"
    assert report["kill_init"].startswith("PermissionError")
    assert (planted.sibling / "outputs.pt").read_text() == "reference outputs"
    assert res.returncode in (0, -9) and server.alive()  # close() kills a worker slow to leave after "exit"
    assert gone_within(token), "a double-forked daemon outlived its worker"


def test_a_hung_candidate_is_killed_through_the_server(box: Sandbox, server, planted: Planted) -> None:
    """kiln cannot signal a pid of the server's namespace: the deadline's kill goes through the
    server, and takes the worker's daemon along."""
    token = f"34{time.monotonic_ns() % 10**6}.5"
    h, _ = start_candidate(box, server, planted, daemon=token, linger_s=300)
    t0 = time.monotonic()
    with pytest.raises(WorkerGone) as gone:
        h.call(CandCompile(), time.monotonic() + 4)
    assert gone.value.timed_out and time.monotonic() - t0 < 30
    h.close()
    assert gone_within(token) and server.alive()

