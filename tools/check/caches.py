"""kiln's check caches, read and written only by kiln's own process (never by a worker).

- `reference/`: facts about a problem alone (the work count for the physics floor, degeneracy),
  keyed by the problem's and cases' sources, dtype and device;
- `baselines/`: the baselines' raw samples (kiln's clock, per call) and the median time of their
  refresh and commit steps on one GPU, keyed by the problem's source, dtype, GPU (name and UUID),
  torch version, the ring's size and the harness version;
- `peaks.json`: the GPU's measured copy bandwidth and matmul rates (`kiln.tools.peaks`);
- `cand/<hash>/`: a candidate's own compile cache (Triton, torch extensions, cubins), per source
  hash: the only cache a worker writes, and only its own source's.
Workers report what they measured in their replies; this module validates and stores it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kiln.tools.files import write_atomic

if TYPE_CHECKING:
    from kiln.tools.check.session import Session

REFERENCE_VERSION = 3  # bump when the cached reference-side facts change meaning (3: degenerate holds weight
# independence only; the rest is judged in the parent across the trials' draws, issue 16)
HARNESS_VERSION = 6  # bump when the timing harness changes what a baseline sample means (3, 4: laps, kiln's clock;
# 5: each lap's refresh + commit kept, for the charge's medians; 6: a lap's slots one stream from one seeding)
BASELINE_MAX_AGE_S = 7 * 24 * 3600.0


def root() -> Path:
    from kiln.tools.compile import default_cache_root

    return default_cache_root()


def machine_key() -> int:
    """This machine's secret for checks that were given a seed (63 bits): `KILN_SECRET` if set (to
    share reproducible verdicts between machines), else random bytes kiln keeps in its cache root
    (mode 0600, made once; no worker can read the cache root). A given seed is rarely secret: a
    reward loop's was derived from the problem and the completion, both in the candidate's hands,
    and a red-team candidate recomputed it and precomputed every trial's answer."""
    env = os.environ.get("KILN_SECRET")
    if env:
        return int.from_bytes(hashlib.sha256(env.encode()).digest()[:8], "little") >> 1
    path = root() / "secret.key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".secret.{os.getpid()}.{time.monotonic_ns()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, os.urandom(32))
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # atomic: the first process's key stands, complete
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    data = path.read_bytes()
    if len(data) < 16:
        raise OSError(f"kiln's secret key {path} is damaged: remove it (a new one is made) or set KILN_SECRET")
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "little") >> 1


def candidate_cache(source_sha: str) -> Path:
    path = root() / "cand" / source_sha[:16]
    path.mkdir(parents=True, exist_ok=True)
    os.utime(path)  # the least recently used caches are the first trimmed
    return path


def baseline_cache() -> Path:
    """The baseline worker's compile caches (torch.compile's Triton kernels): inside the fork server's
    mounted `zygote/`, but never `zygote/` itself, where the server keeps the bytecode it imports at
    its next start (`pycache/`) and its HOME. The baseline runs the problem's own code, which the
    curriculum's Proposer may have written: writing there would reach every later worker."""
    path = root() / "zygote" / "baseline"
    path.mkdir(parents=True, exist_ok=True)
    return path


def profile_dir() -> str | None:
    """A developer's switch: dump a cProfile of every worker into this folder."""
    return os.environ.get("KILN_PROFILE_WORKERS") or None


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write(path: Path, data: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(data, sort_keys=True))
    except OSError:
        pass  # an unwritable cache only costs the work again next time


def _sources_key(s: Session, *parts: object) -> str:
    text = "".join(Path(c.path).read_text() for c in s.cases)
    return hashlib.sha256(repr((text, *parts)).encode()).hexdigest()[:24]


# ----------------------------------------------------------------------------- reference facts


def _reference_path(s: Session) -> Path:
    return root() / "reference" / f"{_sources_key(s, s.o.dtype, s.rec.device, REFERENCE_VERSION)}.json"


def reference_facts(s: Session) -> dict[str, Any] | None:
    data = _read(_reference_path(s))
    if data is None or "physics" not in data or "degenerate" not in data:
        return None
    return {**data, "cached": True}


def store_reference_facts(s: Session, facts: dict[str, Any]) -> None:
    _write(_reference_path(s), facts)


# ----------------------------------------------------------------------------- GPU identity


def gpu_identity(gpu_index: int) -> str | None:
    """'name|uuid|torch version' of this GPU (`kiln.tools.peaks.identity`: NVML, no CUDA context)."""
    from kiln.tools import peaks

    return peaks.identity(gpu_index)


# ----------------------------------------------------------------------------- baselines


def _baseline_path(s: Session, name: str, slots: int) -> Path | None:
    gpu = gpu_identity(s.o.gpu_index)
    if gpu is None:
        return None
    problem = Path(s.cases[0].path).read_text()
    key = hashlib.sha256(repr((problem, s.o.dtype, gpu, HARNESS_VERSION, slots, name))
                         .encode()).hexdigest()[:24]
    return root() / "baselines" / f"{key}.json"


def baseline(s: Session, name: str, slots: int) -> dict[str, Any] | None:
    """A cached baseline run: {'samples_us', 'refresh_s', 'commit_s', 'measured_at', ...} or None."""
    path = _baseline_path(s, name, slots)
    data = _read(path) if path else None
    if data is None or not isinstance(data.get("samples_us"), list) or not data["samples_us"]:
        return None
    if time.time() - float(data.get("measured_at", 0)) > BASELINE_MAX_AGE_S:
        return None
    return {**data, "cached": True}


def store_baseline(s: Session, name: str, slots: int, run: dict[str, Any]) -> None:
    path = _baseline_path(s, name, slots)
    if path is not None:
        keep: dict[str, Any] = {k: run[k] for k in ("samples_us", "overhead_s", "refresh_s", "commit_s", "peak_bytes")
                                if k in run}
        _write(path, {**keep, "measured_at": time.time()})


# ----------------------------------------------------------------------------- bounds on what a candidate leaves


CANDIDATE_CACHE_MAX_BYTES = 2 << 30
"""One candidate source's compile cache (Triton, torch extensions, cubins) may hold this much; a
check that leaves more has its cache removed, and a worker that writes more mid-check is stopped."""
CANDIDATE_CACHE_MAX_FILES = 20_000
ALL_CANDIDATES_MAX_BYTES = 20 << 30
"""The compile caches of all candidate sources together: the least recently used go first."""


def tree_usage(top: Path, max_files: int = CANDIDATE_CACHE_MAX_FILES) -> tuple[int, int]:
    """(bytes, files) under `top`, never following links; counting stops past `max_files`."""
    total, files, _ = _usage(top, max_files)
    return total, files


def _usage(top: Path, max_files: int) -> tuple[int, int, str | None]:
    """`tree_usage`, and a folder that could not be read (a worker may chmod its own folders: what
    kiln can't see, it can't bound)."""
    total = files = 0
    unreadable = None
    stack = [str(top)]
    while stack and files <= max_files:
        path = stack.pop()
        try:
            entries = list(os.scandir(path))
        except FileNotFoundError:
            continue
        except OSError:
            unreadable = unreadable or path
            continue
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                else:
                    total += e.stat(follow_symlinks=False).st_blocks * 512
                    files += 1
            except OSError:
                continue
    return total, files, unreadable


def over_bound(top: Path) -> str | None:
    """Why a candidate's compile cache is over its bound, in words; None if within."""
    size, files, unreadable = _usage(top, CANDIDATE_CACHE_MAX_FILES)
    if unreadable:
        return f"its compile cache has a folder kiln cannot read ({Path(unreadable).name})"
    if size > CANDIDATE_CACHE_MAX_BYTES:
        return f"its compile cache grew past {CANDIDATE_CACHE_MAX_BYTES >> 30} GiB"
    if files > CANDIDATE_CACHE_MAX_FILES:
        return f"its compile cache holds more than {CANDIDATE_CACHE_MAX_FILES} files"
    return None


def trim_candidate_cache(source_sha: str) -> None:
    """After a check: a cache over its bound is removed; then the oldest caches go until all
    candidates' caches fit `ALL_CANDIDATES_MAX_BYTES` (the one just used is kept)."""
    from kiln.tools.files import remove_tree

    own = root() / "cand" / source_sha[:16]
    if own.is_dir() and over_bound(own):
        remove_tree(own)
    base = root() / "cand"
    try:
        dirs = sorted((d for d in base.iterdir() if d.is_dir() and not d.is_symlink() and d != own),
                      key=lambda d: d.stat().st_mtime)
    except OSError:
        return
    sizes = {d: tree_usage(d)[0] for d in dirs}
    total = sum(sizes.values()) + (tree_usage(own)[0] if own.is_dir() else 0)
    for d in dirs:
        if total <= ALL_CANDIDATES_MAX_BYTES:
            break
        remove_tree(d)
        total -= sizes[d]
