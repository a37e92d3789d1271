"""Crashing Triton fixtures really crash the way the manifest says (no kiln involved): each runs
forward once in its own process session under TRITON_INTERPRET=1."""

from __future__ import annotations

import signal

import pytest

from .corpus_lib import HERE, KERNELS, entry_id, load_manifest, problem_path, run_parallel, run_script

CRASHING = [e for e in load_manifest() if e["kind"] == "crashing" and e["lang"] == "triton" and not e["gpu_only"]]
HANG_S = 5.0  # counted from the worker's heartbeat, just before forward


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("crash")

    def run(entry):
        done = out_dir / (entry_id(entry).replace("/", "_") + ".done")
        argv = [str(HERE / "run_forward.py"), str(problem_path(entry)), str(KERNELS / entry["path"]), str(done)]
        proc = run_script(argv, timeout_s=120, env_extra={"TRITON_INTERPRET": "1"},
                          heartbeat=done.with_name(done.name + ".calling"), hang_s=HANG_S)
        return entry["path"], (proc, done.exists())

    return dict(run_parallel(CRASHING, run))


@pytest.mark.parametrize("entry", CRASHING, ids=entry_id)
def test_crashing_fixture_fails_as_described(outcomes, entry):
    proc, returned = outcomes[entry["path"]]
    assert not returned, "forward returned normally"
    if entry["expect_status"] == "timeout":
        assert proc.timed_out
        return
    assert not proc.timed_out, proc.stderr[-500:]
    if "os._exit" in entry["note"]:
        assert proc.returncode == 0  # "success", and yet no result
    elif "SIGSEGV" in entry["note"]:
        assert proc.returncode == -signal.SIGSEGV
    else:
        assert proc.returncode == 1 and "Traceback" in proc.stderr
    if entry.get("expect_reason"):
        assert entry["expect_reason"].lower() in proc.stderr.lower()
