"""The resident fork server (kiln.tools.sandbox.resident): a second `kiln check` process finds the
first one's server instead of starting its own; a worker it forks reaches neither the relay's
socket nor another kiln process's scratch root; a client that goes away takes its workers with it;
and the relay stops when told, or once idle."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import uuid
from pathlib import Path

import pytest

from kiln.tools.check.messages import CandCompile
from kiln.tools.check.servers import zygote_env
from kiln.tools.check.worker import JobSpec
from kiln.tools.check.workers import WorkerHandle, worker_confinement, worker_env
from kiln.tools.sandbox import resident, scratch
from kiln.tools.sandbox.box import Sandbox, server_mounts
from tests.conftest import FIXTURES
from tests.sandbox.conftest import (
    Planted,
    assert_contained,
    gone_within,
    host_processes_with,
    report_of,
    run_cli,
    stage,
)

PROBLEM = FIXTURES / "problems" / "row_softmax.py"
CANDIDATE = FIXTURES / "kernels" / "correct" / "triton" / "row_softmax.py"


def relays_for(cache: Path) -> list[int]:
    """Host pids of resident relays whose server mounts this cache root."""
    return [p for p in host_processes_with(str(cache / "zygote"))
            if b"kiln.tools.sandbox.resident" in Path(f"/proc/{p}/cmdline").read_bytes()]


def stop(pids: list[int]) -> None:
    for pid in pids:
        os.kill(pid, signal.SIGTERM)


def test_a_second_kiln_process_uses_the_first_ones_server(tmp_path: Path, box: Sandbox) -> None:
    cache = tmp_path / "cache"
    env = {"KILN_FORK_SERVER": "resident", "KILN_FORK_SERVER_IDLE_S": "120", "KILN_CACHE_DIR": str(cache)}
    recs = []
    try:
        for i in range(2):
            out = tmp_path / f"rec{i}.json"
            p = run_cli("check", str(PROBLEM), str(CANDIDATE), "--device", "cpu", "--json", str(out), env=env)
            assert p.returncode == 0, p.stderr[-2000:]
            recs.append(json.loads(out.read_text()))
            if i == 0:
                first = relays_for(cache)
                assert len(first) == 1, "the first check left no resident server (or more than one)"
        assert [r["status"] for r in recs] == ["ok", "ok"]
        assert [r["evidence"]["fork_server"] for r in recs] == ["resident", "resident"]
        assert relays_for(cache) == first, "the second process started a server of its own"
        assert first[0] in [s["pid"] for s in resident.running()]  # what `kiln doctor` lists
    finally:
        stop(relays_for(cache))
    end = time.monotonic() + 15
    while relays_for(cache) and time.monotonic() < end:
        time.sleep(0.1)
    assert not relays_for(cache), "SIGTERM did not stop the relay"
    where = resident.socket_dir()
    assert where is not None and not [s for s in where.glob("*.sock") if _serves(s, cache)]


def _serves(sock: Path, cache: Path) -> bool:
    log = sock.with_suffix(".log")
    return log.exists() and str(cache) in log.read_text(errors="replace")


@pytest.fixture
def nested_root(monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test process's scratch root inside the shared dir, as in a process that uses a resident server."""
    monkeypatch.setenv("KILN_FORK_SERVER", "resident")
    shared = scratch.shared_dir()
    assert shared is not None
    root = shared / f"kiln-{os.getpid()}-{scratch.start_time(os.getpid())}"
    (root / "ctl").mkdir(parents=True, exist_ok=True, mode=0o700)
    monkeypatch.setattr(scratch, "_ROOT", [root])
    yield root
    scratch._rmtree(root)


@pytest.fixture
def relay(tmp_path: Path, box: Sandbox, nested_root: Path, monkeypatch: pytest.MonkeyPatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("KILN_CACHE_DIR", str(cache))
    monkeypatch.setenv("KILN_FORK_SERVER_IDLE_S", "60")
    env = zygote_env("cpu", 0, cache)
    command = box.server_command([sys.executable, "-m", "kiln.tools.sandbox.zygote"], env=env,
                                 write=server_mounts(cache, nested_root.parent))
    client = resident.connect(command, env)
    yield client, command, env, cache
    client.close()
    stop([client.relay_pid])


def hostile_worker(box: Sandbox, client, planted: Planted, cache: Path, **extra: object) -> tuple[WorkerHandle, Path]:
    check = planted.sibling.parent
    stage(check / "shared", planted.targets(**extra))
    cand_cache = cache / "cand" / uuid.uuid4().hex
    spec = JobSpec(role="candidate", candidate=str(check / "shared" / "hostile.py"), device="cpu",
                   work_dir=str(check / "candidate"), cache_root=str(cand_cache))
    (check / "candidate").mkdir(parents=True, exist_ok=True)
    (check / "candidate" / "report.json").touch()
    h = WorkerHandle(spec, env=worker_env(spec, cand_cache), zygote=client, backstop_s=120,
                     confinement=worker_confinement(spec, cand_cache), sandbox=box)
    return h, check / "candidate"


def test_a_worker_reaches_neither_the_relay_nor_another_process(box: Sandbox, relay, planted: Planted) -> None:
    client, _command, _env, cache = relay
    other = scratch.shared_dir() / "kiln-999999-1" / "check-x" / "reference"  # another kiln process's check
    other.mkdir(parents=True)
    (other / "outputs.pt").write_text("another process's reference outputs")
    planted.cleanup.append(other.parents[1])
    planted.reads["other_process"] = other / "outputs.pt"
    sockets = {p.stem: str(p) for p in resident.socket_dir().glob("*.sock")}
    h, work = hostile_worker(box, client, planted, cache, unix=sockets)
    try:
        reply = h.call(CandCompile(), time.monotonic() + 120)
    finally:
        h.close()
    assert reply.compile.ok, reply
    report = json.loads(report_of(work).read_text())
    assert sockets and all(f"unix:{k}" in report for k in sockets)
    assert_contained(report, planted)  # the unix:* attempts, the other process's outputs included
    assert client.alive()


def test_a_client_that_goes_away_takes_its_workers_along(box: Sandbox, relay, planted: Planted) -> None:
    client, command, env, cache = relay
    token = f"44{time.monotonic_ns() % 10**6}.5"
    h, _work = hostile_worker(box, client, planted, cache, daemon=token)
    h.call(CandCompile(), time.monotonic() + 120)  # imported: the daemon is out, the worker waits for more
    end = time.monotonic() + 20  # the daemon's exec of `sleep` races the worker's reply
    while not host_processes_with(token) and time.monotonic() < end:
        time.sleep(0.05)
    assert host_processes_with(token), "the hostile worker's daemon never started"
    client.close()  # as when its kiln process dies: the relay kills what that connection started
    assert gone_within(token, 15), "the worker (or its daemon) outlived its client's connection"
    again = resident.connect(command, env)  # the relay itself still serves
    try:
        assert again.relay_pid == client.relay_pid and again.alive()
    finally:
        again.close()


def test_the_relay_stops_once_idle(tmp_path: Path, box: Sandbox, nested_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("KILN_FORK_SERVER_IDLE_S", "2")
    env = zygote_env("cpu", 0, cache)
    command = box.server_command([sys.executable, "-m", "kiln.tools.sandbox.zygote"], env=env,
                                 write=server_mounts(cache, nested_root.parent))
    client = resident.connect(command, env)
    proc = next(p for p in resident._UNREAPED if p.pid == client.relay_pid)  # this process started it
    time.sleep(3)
    assert proc.poll() is None, "the relay stopped while a client was connected"
    client.close()
    assert proc.wait(timeout=30) == 0, "the relay kept running after its idle time"


def test_the_key_follows_everything_the_server_depends_on(monkeypatch: pytest.MonkeyPatch) -> None:
    cmd, env = ["bwrap", "--", "python"], {"A": "1"}
    k = resident.server_key(cmd, env)
    assert resident.server_key(cmd, env) == k
    assert resident.server_key(cmd, {"A": "2"}) != k
    assert resident.server_key([*cmd, "--plan", "{}"], env) != k
    stamp = resident._code_stamp()
    assert any(path.endswith("tools/sandbox/zygote.py") for path, _, _ in stamp)
    monkeypatch.setattr(resident, "_code_stamp", lambda: [*stamp, ["edited.py", 1, 2]])
    assert resident.server_key(cmd, env) != k  # an edited kiln source file: a new server


def test_only_the_full_outer_layer_hosts_a_resident_server(box: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KILN_FORK_SERVER", "resident")
    assert resident.eligible(box) == ""
    assert "bubblewrap" in resident.eligible(type(box)(level=box.level, bwrap=None, plan=box.plan, record=box.record))
    monkeypatch.setenv("KILN_FORK_SERVER", "process")
    assert resident.eligible(box) and scratch.shared_dir() is None


def test_the_socket_is_never_inside_what_the_sandbox_mounts(box: Sandbox, tmp_path: Path) -> None:
    cmd = box.server_command([sys.executable, "-m", "kiln.tools.sandbox.zygote"], env={},
                             write=[str(tmp_path / "shared")])
    where = resident.socket_dir()
    assert where is not None and resident.visible_in(cmd, where) == ""
    assert resident.visible_in(cmd, tmp_path / "shared" / "kiln-rs-0") == str(tmp_path / "shared")
    assert resident.visible_in(cmd, Path(sys.prefix) / "tmp") != ""  # the read-only Python tree counts too


def test_a_day_old_lock_and_log_without_a_relay_are_removed(tmp_path: Path) -> None:
    old, live = tmp_path / "a", tmp_path / "b"
    for stem in (old, live):
        for ext in (".log", ".lock"):
            stem.with_suffix(ext).write_text("")
    live.with_suffix(".sock").write_text("")  # a relay still answers for this key
    day = time.time() - resident.TIDY_AGE_S - 60
    for p in tmp_path.iterdir():
        os.utime(p, (day, day))
    resident._tidy(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.lock", "b.log", "b.sock"]
