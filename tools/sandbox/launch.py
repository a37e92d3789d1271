"""One-shot confined runs and the sandbox's probe (`python -m kiln.tools.sandbox.launch ...`), run
inside the bubblewrap layer when there is one.

- `run --plan JSON --confine JSON [--status-fd N] -- ARGV...`: fork a worker with the inner layer
  (`kiln.tools.sandbox.confine`), exec ARGV in it, wait, write its exit code (or -signal) to fd N
  (a pipe from kiln, closed in the worker before it runs anything), and exit with it (128 + signal). For the Proposer's case modules and the profiler's targets:
  the fork server is for the check's hot path.
- `probe`: which inner steps work here, as one JSON line on stdout.

Imports nothing heavy (no torch, no pydantic): it starts in tens of milliseconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import asdict

from kiln.tools.sandbox import landlock, nsutil
from kiln.tools.sandbox.confine import (
    SANDBOX_EXIT,
    Confinement,
    Plan,
    enter,
    fork_worker,
    kill_worker,
    wait_code,
)


def _waitpid(pid: int) -> int:
    while True:
        try:
            return os.waitpid(pid, 0)[1]
        except InterruptedError:
            continue


def _reap(pid: int | None) -> None:
    if pid:
        with contextlib.suppress(ChildProcessError):
            _waitpid(pid)


def run(plan: Plan, conf: Confinement, argv: list[str], status_fd: int | None = None) -> int:
    if status_fd is not None:
        os.set_inheritable(status_fd, False)  # not for the namespace's init; the worker closes it
    pid, init = fork_worker(plan)
    if pid == 0:
        try:
            enter(conf, plan)
            os.execvp(argv[0], argv)
        except BaseException as exc:  # noqa: BLE001 - report and leave; never run uncontained
            os.write(2, f"kiln sandbox: {exc}\n".encode(errors="replace"))
        os._exit(SANDBOX_EXIT)
    code = wait_code(_waitpid(pid))
    kill_worker(pid, init)
    _reap(init)
    if status_fd is not None:
        with contextlib.suppress(OSError):
            os.write(status_fd, str(code).encode())
    return code if code >= 0 else 128 - code


# ----------------------------------------------------------------------------- probe


def _try(plan: Plan) -> str | None:
    """None when a child contained by `plan` came up as planned, else why not."""
    r, w = os.pipe()
    try:
        pid, init = fork_worker(plan)
    except OSError as exc:
        os.close(r)
        os.close(w)
        return str(exc)
    if pid == 0:
        os.close(r)
        msg = b"ok"
        try:
            enter(Confinement(), plan, keep_fds=(w,))
            if plan.pidns and (os.getpid() != 2 or {int(p) for p in os.listdir("/proc") if p.isdigit()} - {1, 2}):
                msg = b"the fresh /proc does not match the PID namespace"
        except BaseException as exc:  # noqa: BLE001 - the probe's answer
            msg = str(exc).encode(errors="replace")
        os.write(w, msg)
        os._exit(0)
    os.close(w)
    answer = os.read(r, 4096).decode(errors="replace")
    os.close(r)
    _waitpid(pid)
    kill_worker(pid, init)
    _reap(init)
    return None if answer == "ok" else (answer or "the probe child died")


def _dropped(plan: Plan, nxt: Plan) -> str:
    if plan.pidns and not nxt.pidns:
        return "pid-namespace"
    return "user-namespace" if plan.userns and not nxt.userns else "landlock"


def probe() -> dict:
    """The best plan that works here, and why each better one did not."""
    abi = landlock.abi_version()
    plans = [Plan(True, True, abi), Plan(False, True, abi), Plan(False, False, abi)]
    plans += [Plan(False, False, 0)] if abi else []
    missing: dict[str, str] = {}
    if not abi:
        missing["landlock"] = "the kernel has no Landlock (or it is disabled)"
    chosen = plans[-1]
    for i, plan in enumerate(plans):
        why = _try(plan) if i < len(plans) - 1 else None
        if why is None:
            chosen = plan
            break
        missing.setdefault(_dropped(plan, plans[i + 1]), why)
    return {"plan": asdict(chosen), "missing": missing, "landlock_abi": abi,
            "cap_sys_admin": bool(nsutil.effective_caps() & (1 << nsutil.CAP_SYS_ADMIN))}


def main(argv: list[str]) -> int:
    if argv[:1] == ["probe"]:
        print(json.dumps(probe()), flush=True)
        return 0
    if argv[:1] != ["run"] or "--" not in argv:
        print("usage: launch run --plan JSON --confine JSON [--status-fd N] -- ARGV... | launch probe",
              file=sys.stderr)
        return 2
    sep = argv.index("--")
    opts = dict(zip(argv[1:sep:2], argv[2:sep:2], strict=False))
    conf = Confinement.from_dict(json.loads(opts.get("--confine", "{}")))
    fd = opts.get("--status-fd")
    return run(Plan.from_json(opts.get("--plan", "{}")), conf, argv[sep + 1:], int(fd) if fd else None)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
