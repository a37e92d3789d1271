"""Helpers for the red-team corpus: run a hostile candidate through the real check pipeline, and
look for the side effects it tried to cause (files, connections, processes, secrets).

A module of its own name (not `conftest`): the test files import it by name, as tests/graphs does
with graph_helpers."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kiln.tools.errors import KilnInputError
from kiln.tools.records import CheckOptions, CheckRecord

HERE = Path(__file__).parent
PROBLEMS = HERE / "problems"
CANDIDATES = HERE / "candidates"
CASES = HERE / "cases"
PARTS = CANDIDATES / "parts"
INCLUDE = re.compile(r"^# <include (\w+)>$", re.M)
RELU = PROBLEMS / "relu_tiny.py"
MATMUL_GPU = PROBLEMS / "matmul_gpu.py"
RELU_GPU = PROBLEMS / "relu_gpu.py"
IN_PROCESS = ("the evidence (accounting, fingerprints, timing samples) is still measured in the candidate's process, "
              "which can rewrite it once it runs")
"""Why a candidate executed anyway (`run_rejected`) still fools kiln."""


def render(src: Path, dest: Path, **subs: object) -> Path:
    """A copy of `src` in folder `dest`: each `# <include NAME>` line replaced by candidates/parts/NAME.py
    (the honest kernel an attack rides on, written once), each `__KEY__` placeholder by its value."""
    text = INCLUDE.sub(lambda m: (PARTS / f"{m.group(1)}.py").read_text(), src.read_text())
    for key, value in subs.items():
        text = text.replace(f"__{key.upper()}__", str(value))
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / src.name
    path.write_text(text)
    return path


def candidate(name: str, dest: Path, **subs: object) -> Path:
    return render(CANDIDATES / f"{name}.py", dest, **subs)


def honest(dest: Path) -> Path:
    """The control: an honest ReLU that must come back `ok` (kiln still works)."""
    return candidate("honest_relu", dest)


def check(cand: Path, *, problem: Path = RELU, policy: str = "partial", device: str = "cpu",
          cases: list[Path] | None = None, **opts: object) -> CheckRecord:
    """The real in-process `check()` (worker subprocesses from kiln's fork server); `opts` are
    further CheckOptions fields."""
    from kiln.tools.check import check as kiln_check

    fields: dict = {"timeout_s": 120, "compile_timeout_s": 60, "correctness_timeout_s": 60, **opts}
    options = CheckOptions(device=device, trials=1, policy=policy, cases=[str(c) for c in cases or []], **fields)
    return kiln_check(problem, cand, options)


def check_or_blame(cand: Path, **kw: object) -> CheckRecord:
    """`check()`, failing the test (not erroring) when kiln blames the problem for the candidate."""
    try:
        return check(cand, **kw)
    except KilnInputError as exc:
        raise AssertionError(f"kiln blamed the problem for a candidate's attack: {exc}") from None


ATTACK = {"run_rejected": True, "static": "denylist"}
"""Options that run arbitrary Python past the allowlist: the threat model's worker."""


def ran_as(rec: CheckRecord) -> str:
    """What the executed attack came to: its status before the static rejection was applied (the
    verdict of a candidate the scan refused stays `rejected`; `run_rejected` only makes it run)."""
    for r in rec.reasons:
        if r.startswith("before the integrity verdict: "):
            return r.split(": ", 1)[1]
    return rec.status


def reject_rules(rec: CheckRecord) -> list[str]:
    return [f.rule for f in (rec.integrity.findings if rec.integrity else []) if f.severity == "reject"]


def assert_rejected(rec: CheckRecord, *prefixes: str) -> None:
    """`rejected`, by a reject finding whose rule starts with one of `prefixes`, named in the reasons."""
    assert rec.status == "rejected", (rec.status, rec.reasons)
    assert not rec.correct
    hits = [r for r in reject_rules(rec) if r.startswith(prefixes)]
    assert hits, (f"rejected, but by none of {prefixes}", reject_rules(rec), rec.reasons)
    assert any(h in " ".join(rec.reasons) for h in hits), rec.reasons


def assert_stopped(rec: CheckRecord, *prefixes: str, also: frozenset[str] = frozenset()) -> None:
    """Not accepted: `rejected` by one of `prefixes`, or one of the statuses in `also` (an attack
    that a sandbox stopped halfway is `incorrect`, `crashed` or `compile_error`, not a rejection)."""
    assert rec.status != "ok" and not rec.correct, ("accepted", rec.reasons)
    if rec.status in also:
        return
    assert_rejected(rec, *prefixes)


def assert_contained(rec: CheckRecord) -> None:
    """The verdict for an attack on the machine rather than on the verdict (files, network, caches,
    signals): a sandbox may leave it nothing to do (`ok`: the kernel itself is honest) or stop it
    halfway (`compile_error`, `crashed`), the allowlist rejects it (`static.*`). Never `incorrect`,
    `timeout` or `error`, and never kiln blaming the problem (see check_or_blame)."""
    assert rec.status in ("ok", "rejected", "compile_error", "crashed"), (rec.status, rec.reasons)
    if rec.status == "rejected":
        assert_rejected(rec, "static.")


# ----------------------------------------------------------------------------- side effects


@dataclass
class TcpSink:
    """A TCP server on 127.0.0.1 that counts the connections it accepts (and what they sent)."""

    port: int = 0
    accepted: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._srv.bind(("127.0.0.1", 0))
        self._srv.listen(16)
        self._srv.settimeout(0.2)
        self.port = self._srv.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._srv.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(0.5)
                data = b""
                with contextlib.suppress(OSError):
                    data = conn.recv(4096)
                self.accepted.append(data)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._srv.close()


@contextlib.contextmanager
def tcp_sink() -> Iterator[TcpSink]:
    sink = TcpSink()
    try:
        yield sink
    finally:
        sink.close()


def tree_digest(root: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """path -> sha256 of every file under `root` (paths containing any of `skip` left out)."""
    out: dict[str, str] = {}
    if not root.exists():
        return out
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_file() and not any(s in rel for s in skip):
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def pids_with_cmdline(token: str) -> list[int]:
    """Processes whose command line contains `token` (a daemon a candidate left behind)."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            with contextlib.suppress(OSError):
                if token.encode() in (d / "cmdline").read_bytes():
                    found.append(int(d.name))
    return found


def pids_with_cwd_under(root: Path) -> list[int]:
    """Processes whose working directory lies under `root` (workers of a check)."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(d / "cwd").startswith(str(root)):
                    found.append(int(d.name))
    return found


def kill_pids(pids: list[int]) -> None:
    """End processes this test caused (a leftover daemon or worker), one by one, by their id."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


# ----------------------------------------------------------------------------- the kiln command line


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment a user's `kiln` runs with: theirs, with HOME (and so ~/.cache/kiln) in the
    test's folder. The fork server skips its optional preloads (dynamo, inductor: only the GPU's
    torch.compile baseline needs them), which halves its start-up on CPU."""
    env = {k: v for k, v in os.environ.items() if k not in ("KILN_CACHE_DIR", "XDG_CACHE_HOME")}
    env.update({"HOME": str(home), "KILN_ZYGOTE_PRELOAD_EXTRA": "", "PYTHONUNBUFFERED": "1", **extra})
    return env


def kiln(*args: str, env: dict[str, str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kiln.evals.cli", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def kiln_popen(*args: str, env: dict[str, str], cwd: Path) -> subprocess.Popen:
    """`kiln ...` in its own process group (so the test can signal that group, and only it)."""
    return subprocess.Popen([sys.executable, "-m", "kiln.evals.cli", *args], env=env, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
