"""kiln's check caches, read and written only by kiln's own process (never by a worker).

- `reference/`: facts about a problem alone (the work count for the physics floor, degeneracy),
  keyed by the problem's and cases' sources, dtype and device;
- `baselines/`: the baselines' raw samples and their loop's wall time on one GPU, keyed by the
  problem's source, dtype, GPU (name and UUID), torch version and the harness version;
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

if TYPE_CHECKING:
    from kiln.tools.check.session import Session

REFERENCE_VERSION = 3  # bump when the cached reference-side facts change meaning (3: degenerate holds weight
# independence only; the rest is judged in the parent across the trials' draws, issue 16)
HARNESS_VERSION = 2  # bump when the timing harness changes what a baseline sample means
BASELINE_MAX_AGE_S = 7 * 24 * 3600.0


def root() -> Path:
    from kiln.tools.compile import default_cache_root

    return default_cache_root()


def candidate_cache(source_sha: str) -> Path:
    path = root() / "cand" / source_sha[:16]
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
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, sort_keys=True))
        os.replace(tmp, path)
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


def _baseline_path(s: Session, name: str, n_sets: int) -> Path | None:
    gpu = gpu_identity(s.o.gpu_index)
    if gpu is None:
        return None
    problem = Path(s.cases[0].path).read_text()
    key = hashlib.sha256(repr((problem, s.o.dtype, gpu, HARNESS_VERSION, n_sets, name))
                         .encode()).hexdigest()[:24]
    return root() / "baselines" / f"{key}.json"


def baseline(s: Session, name: str, n_sets: int) -> dict[str, Any] | None:
    """A cached baseline run: {'samples_us', 'wall_s', 'n_calls', 'measured_at', ...} or None."""
    path = _baseline_path(s, name, n_sets)
    data = _read(path) if path else None
    if data is None or not isinstance(data.get("samples_us"), list) or not data["samples_us"]:
        return None
    if time.time() - float(data.get("measured_at", 0)) > BASELINE_MAX_AGE_S:
        return None
    return {**data, "cached": True}


def store_baseline(s: Session, name: str, n_sets: int, run: dict[str, Any]) -> None:
    path = _baseline_path(s, name, n_sets)
    if path is not None:
        keep: dict[str, Any] = {k: run[k] for k in ("samples_us", "wall_s", "n_calls", "peak_bytes") if k in run}
        _write(path, {**keep, "measured_at": time.time()})
