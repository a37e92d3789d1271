"""The isolation layer on its own: scrubbed environment, deadlines from the heartbeat, process groups."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from kiln.tools.sandbox.isolation import default_as_limit, run_isolated, scrubbed_env, start_isolated


def test_scrubbed_env_drops_secrets_and_pins_device(tmp_path: Path, monkeypatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HF_TOKEN", "MY_SECRET", "DB_PASSWORD", "GITHUB_TOKEN",
                 "AWS_ACCESS_KEY_ID", "RANDOM_UNLISTED_VAR"):
        monkeypatch.setenv(name, "x")
    env = scrubbed_env(device="cpu", gpu_index=0, cache_dir=tmp_path, extra={"LEAK_TOKEN": "t", "OK_VAR": "1"})
    assert not [k for k in env if "KEY" in k or "TOKEN" in k or "SECRET" in k or "PASSWORD" in k]
    assert "RANDOM_UNLISTED_VAR" not in env and env["OK_VAR"] == "1"
    assert env["TRITON_INTERPRET"] == "1" and env["CUDA_VISIBLE_DEVICES"] == ""
    assert env["TRITON_CACHE_DIR"] == str(tmp_path / "triton") and "PATH" in env
    gpu = scrubbed_env(device="cuda", gpu_index=3, cache_dir=tmp_path)
    assert gpu["CUDA_VISIBLE_DEVICES"] == "3" and "TRITON_INTERPRET" not in gpu


WORKER = """
import os, subprocess, sys, time
from kiln.tools.sandbox.isolation import beat
hb = sys.argv[1]
beat(hb, "compile")
child = subprocess.Popen(["sleep", "300"])          # a grandchild, like nvcc under ninja
open(sys.argv[2], "w").write(str(child.pid))
beat(hb, "correctness", "trial 0")
print("noise on stderr", file=sys.stderr, flush=True)
while True:
    time.sleep(0.05)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def test_stage_deadline_kills_the_whole_group(tmp_path: Path) -> None:
    hb, pidfile = tmp_path / "hb.json", tmp_path / "pid"
    env = scrubbed_env(device="cpu", gpu_index=0, cache_dir=tmp_path)
    t0 = time.monotonic()
    res = run_isolated([sys.executable, "-c", WORKER, str(hb), str(pidfile)], env=env, cwd=tmp_path, timeout_s=60,
                       heartbeat=hb, stage_timeouts={"correctness": 1.0})
    assert res.timed_out and res.stage == "correctness" and res.detail == "trial 0"
    assert "correctness" in (res.timeout_reason or "") and time.monotonic() - t0 < 20
    assert "noise on stderr" in res.stderr_tail
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


def test_untimed_stage_and_signals(tmp_path: Path) -> None:
    env = scrubbed_env(device="cpu", gpu_index=0, cache_dir=tmp_path)
    hb = tmp_path / "hb.json"
    # the beat written by hand (what `beat` writes): importing kiln first can take a loaded machine
    # longer than the timeout, before the worker is in its untimed stage at all
    code = ("import json, os, signal, time\n"
            f"open({str(hb)!r} + '.tmp', 'w').write(json.dumps({{'stage': 'await', 'detail': '', 't': time.time()}}))\n"
            f"os.replace({str(hb)!r} + '.tmp', {str(hb)!r})\ntime.sleep(3)\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    proc = start_isolated([sys.executable, "-S", "-c", code], env=env, cwd=tmp_path, timeout_s=1.5, heartbeat=hb,
                          untimed_stages=("await",))
    res = proc.wait()
    assert not res.timed_out and res.signal_name == "SIGSEGV" and res.returncode == -11


def test_address_space_cap_only_on_cpu() -> None:
    assert default_as_limit("cuda") is None
    cap = default_as_limit("cpu")
    assert cap is not None and cap >= 4 << 30
