"""What the OS sandbox costs per worker: spawn -> first reply -> exit, with and without it.

    python bench/sandbox_overhead.py [--n 10] [--device cpu|cuda] [--bwrap PATH] [--json FILE]

Fork-server path: a `reference` worker with no cases is forked, answers `exit`, and is reaped; an
unconfined server against a sandboxed one (bubblewrap outside, namespaces + Landlock per worker).
One-shot path (the Proposer's cases, the profiler's targets): `python -c pass` exec'd plainly
against through the launcher inside bubblewrap. Also the one-time costs: the probe, and each
server's start (imports included).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

from kiln.tools.check import caches, scratch, zygote
from kiln.tools.check.servers import zygote_env
from kiln.tools.check.worker import JobSpec
from kiln.tools.check.workers import WorkerHandle, worker_confinement, worker_env
from kiln.tools.sandbox.box import sandbox_for
from kiln.tools.sandbox.confine import Confinement
from kiln.tools.sandbox.isolation import run_isolated, scrubbed_env


def _spawn_once(server: zygote.Zygote, box, device: str) -> float:
    check = scratch.root() / f"check-bench-{uuid.uuid4().hex[:8]}"
    (check / "shared").mkdir(parents=True)
    spec = JobSpec(role="reference", device=device, work_dir=str(check / "reference"))
    cache = caches.root() / "zygote"
    t0 = time.perf_counter()
    h = WorkerHandle(spec, env=worker_env(spec, cache), zygote=server, backstop_s=60,
                     confinement=worker_confinement(spec, cache) if box else None, sandbox=box)
    h.call("exit", time.monotonic() + 60)
    h.proc.wait()
    return time.perf_counter() - t0


def _server(box, device: str) -> tuple[zygote.Zygote, float]:
    env = zygote_env(device, 0, caches.root())
    t0 = time.perf_counter()
    if box is None:
        return zygote.Zygote(env), time.perf_counter() - t0
    from kiln.tools.sandbox.box import server_mounts

    cmd = box.server_command([sys.executable, "-m", "kiln.tools.sandbox.zygote"], env=env,
                             write=server_mounts(caches.root()))
    return zygote.Zygote(env, cmd), time.perf_counter() - t0


def _oneshot(box, n: int) -> list[float]:
    work = scratch.root() / f"oneshot-{uuid.uuid4().hex[:8]}"
    work.mkdir()
    env = scrubbed_env(device="cpu", gpu_index=0, cache_dir=work / "cache")
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        res = run_isolated([sys.executable, "-S", "-c", "pass"], env=env, cwd=work, timeout_s=60,
                           confinement=Confinement(write=(str(work),)) if box else None, sandbox=box)
        assert res.returncode == 0, res.stderr_tail
        out.append(time.perf_counter() - t0)
    return out


def _stats(xs: list[float]) -> dict[str, float]:
    return {"median_ms": round(1e3 * statistics.median(xs), 1), "min_ms": round(1e3 * min(xs), 1),
            "max_ms": round(1e3 * max(xs), 1), "n": len(xs)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--bwrap", default=None)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    t0 = time.perf_counter()
    box = sandbox_for("strict", a.bwrap)
    rows: dict[str, object] = {"probe_s": round(time.perf_counter() - t0, 3), "isolation": box.record.model_dump()}
    for name, b in (("plain", None), ("sandboxed", box)):
        server, start_s = _server(b, a.device)
        try:
            _spawn_once(server, b, a.device)  # warm: first fork touches more pages
            rows[f"fork_server_{name}"] = {"server_start_s": round(start_s, 2),
                                           **_stats([_spawn_once(server, b, a.device) for _ in range(a.n)])}
        finally:
            server.close()
        rows[f"oneshot_{name}"] = _stats(_oneshot(b, a.n))
    for kind in ("fork_server", "oneshot"):
        plain, boxed = rows[f"{kind}_plain"], rows[f"{kind}_sandboxed"]
        rows[f"{kind}_overhead_ms"] = round(boxed["median_ms"] - plain["median_ms"], 1)  # type: ignore[index]
    text = json.dumps(rows, indent=1)
    print(text)
    if a.json:
        a.json.write_text(text)


if __name__ == "__main__":
    main()
