"""Where a fresh kiln process spends its first seconds: the fork server's start (plain and inside the
sandbox), the sandbox probe, one worker spawn. Prints one line per figure (seconds).

    python3 bench/startup_times.py [--device cuda|cpu]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def timed(label: str, fn) -> object:  # noqa: ANN001 - a bench helper
    t0 = time.monotonic()
    out = fn()
    print(f"{label}: {time.monotonic() - t0:.2f} s", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    import os

    os.environ.setdefault("KILN_CACHE_DIR", tempfile.mkdtemp(prefix="kiln-startup-"))
    from kiln.tools.check import caches, servers
    from kiln.tools.sandbox import zygote
    from kiln.tools.sandbox.box import sandbox_for

    box = timed("sandbox probe", lambda: sandbox_for("best-effort", None))
    print("isolation:", getattr(box, "record", None) and box.record.level, flush=True)
    root = caches.root()
    timed("fork server start, sandboxed (cold)", lambda: servers.fork_server_for(a.device, 0, root, box))
    zygote.shutdown()
    timed("fork server start, sandboxed (again)", lambda: servers.fork_server_for(a.device, 0, root, box))
    zygote.shutdown()
    timed("fork server start, plain", lambda: servers.fork_server_for(a.device, 0, Path(root), None))
    zygote.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
