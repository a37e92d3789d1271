"""`kiln doctor`: is this machine ready to compile, verify, time and profile kernels?

collect (one function per item, each returning a DoctorItem) -> render (a rich table or JSON).
Every item is OK, WARN or FAIL with a fix hint. Exit code 1 when any item FAILs.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Literal

import typer

from kiln.tools import cli_options as o
from kiln.tools.records import Record

Status = Literal["OK", "WARN", "FAIL"]


class DoctorItem(Record):
    name: str
    status: Status
    detail: str
    fix: str = ""


def _run(argv: list[str], timeout_s: float = 60.0, env: dict[str, str] | None = None) -> tuple[int, str]:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env)
        return p.returncode, (p.stdout + p.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)


_PROBE = """
import json, sys
out = {"python": sys.version.split()[0]}
try:
    import torch
    out.update(torch=torch.__version__, torch_cuda=torch.version.cuda, cuda_available=torch.cuda.is_available())
    import triton, triton.language as tl
    out["triton"] = triton.__version__

    @triton.jit
    def axpb(x, y, n, B: tl.constexpr):
        o = tl.program_id(0) * B + tl.arange(0, B)
        m = o < n
        tl.store(y + o, tl.load(x + o, mask=m) * 2 + 1, mask=m)

    x = torch.arange(37, dtype=torch.float32)
    y = torch.zeros_like(x)
    axpb[(3,)](x, y, 37, B=16)
    out["interpreter"] = "ok" if torch.equal(y, x * 2 + 1) else f"wrong result {y.tolist()}"
except Exception as exc:  # reported as the item that failed
    out["error"] = f"{type(exc).__name__}: {exc}"[:300]
print(json.dumps(out))
"""
_PROBE_LOCK = threading.Lock()
_PROBED: list[dict] = []


def probe() -> dict:
    """torch, Triton and the interpreter, asked once in one subprocess (TRITON_INTERPRET=1): kiln's own
    process never imports torch for the doctor, so the slow import happens once, beside the others."""
    with _PROBE_LOCK:
        if not _PROBED:
            with tempfile.TemporaryDirectory(prefix="kiln-doctor-") as tmp:
                env = {**os.environ, "TRITON_INTERPRET": "1", "TRITON_CACHE_DIR": tmp}
                rc, out = _run([sys.executable, "-c", _PROBE], timeout_s=180, env=env)
            try:
                _PROBED.append(json.loads(out.strip().splitlines()[-1]))
            except (ValueError, IndexError):
                _PROBED.append({"error": (out.splitlines() or [f"exit {rc}"])[-1][:300]})
        return _PROBED[0]


def check_python() -> DoctorItem:
    facts = probe()
    if "torch" not in facts:
        return DoctorItem(name="torch / Triton", status="FAIL", detail=facts.get("error", "no torch"),
                          fix="pip install torch triton")
    if "triton" not in facts:
        return DoctorItem(name="torch / Triton", status="FAIL", detail=f"torch {facts['torch']}, no Triton",
                          fix="pip install triton")
    return DoctorItem(name="torch / Triton", status="OK",
                      detail=f"python {facts['python']}, torch {facts['torch']}, triton {facts['triton']}")


def check_gpu() -> DoctorItem:
    from kiln.tools.gpuenv import _nvml

    nv = _nvml()
    if nv is None or not probe().get("cuda_available"):
        return DoctorItem(name="GPU / driver", status="WARN", detail="no CUDA GPU visible (NVML or torch)",
                          fix="CPU mode: Triton candidates run under the interpreter, CUDA ones are 'unsupported'; "
                              "for timing use a machine with an NVIDIA GPU, its driver and a CUDA build of torch")
    names = [nv.nvmlDeviceGetName(nv.nvmlDeviceGetHandleByIndex(i)) for i in range(nv.nvmlDeviceGetCount())]
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in names]
    driver = nv.nvmlSystemGetDriverVersion()
    return DoctorItem(name="GPU / driver", status="OK", detail=f"{len(names)} GPU(s): {', '.join(names)}; driver {driver}")


def check_cuda() -> DoctorItem:
    nvcc = shutil.which("nvcc")
    rc, out = _run([nvcc, "--version"]) if nvcc else (1, "")
    release = [ln.split("release", 1)[1].strip(" ,") for ln in out.splitlines() if "release" in ln]
    nvcc_v = (release[0] if release else out.splitlines()[-1].strip()) if rc == 0 and out else None
    torch_cuda = probe().get("torch_cuda")
    built = f"torch built for CUDA {torch_cuda}" if torch_cuda else "torch is a CPU build (no CUDA)"
    detail = f"{built}; nvcc: {nvcc_v or 'not found'}"
    if nvcc_v is None:
        return DoctorItem(name="CUDA / nvcc", status="WARN", detail=detail,
                          fix="install the CUDA toolkit (nvcc) for load_inline candidates and CPU compile checks")
    if torch_cuda is None:
        return DoctorItem(name="CUDA / nvcc", status="WARN", detail=detail,
                          fix="torch is a CPU build: install a CUDA build of torch to run CUDA candidates")
    return DoctorItem(name="CUDA / nvcc", status="OK", detail=detail)


def check_fast_path() -> DoctorItem:
    from kiln.tools.cuda import _bindings

    if _bindings() is not None:
        return DoctorItem(name="fast CUDA path", status="OK", detail="NVRTC via cuda-bindings (~0.2 s per kernel)")
    if shutil.which("nvcc"):
        return DoctorItem(name="fast CUDA path", status="WARN", detail="no cuda-bindings: falls back to nvcc -cubin",
                          fix="pip install cuda-bindings (NVRTC: faster compiles; also needed to launch kernels)")
    return DoctorItem(name="fast CUDA path", status="WARN", detail="neither cuda-bindings nor nvcc",
                      fix="pip install cuda-bindings")


def check_ninja() -> DoctorItem:
    if shutil.which("ninja") or importlib.util.find_spec("ninja"):
        return DoctorItem(name="ninja (load_inline)", status="OK", detail="found")
    return DoctorItem(name="ninja (load_inline)", status="WARN", detail="not found", fix="pip install ninja")


def check_ncu() -> DoctorItem:
    try:
        detect_rung = importlib.import_module("kiln.tools.profile").detect_rung
    except (ImportError, AttributeError):
        detect_rung = None
    if detect_rung is not None:
        info = detect_rung()
        ok = info.rung == "ncu" and info.counters is not False
        detail = f"rung '{info.rung}': {info.reason}" + (f" (ncu {info.ncu_version})" if info.ncu_version else "")
        return DoctorItem(name="Nsight Compute", status="OK" if ok else "WARN", detail=detail,
                          fix="" if ok else "install Nsight Compute and allow counters "
                          "(NVreg_RestrictProfilingToAdminUsers=0) for full profiles")
    ncu = shutil.which("ncu")
    if ncu is None:
        return DoctorItem(name="Nsight Compute", status="WARN", detail="ncu not found",
                          fix="install Nsight Compute (ncu) for hardware-counter profiles")
    rc, out = _run([ncu, "--version"])
    return DoctorItem(name="Nsight Compute", status="OK" if rc == 0 else "WARN",
                      detail=(out.splitlines() or ["?"])[-1] + " (counter access not tested)")


def check_interpreter() -> DoctorItem:
    facts = probe()
    if facts.get("interpreter") == "ok":
        return DoctorItem(name="Triton interpreter", status="OK", detail="ran a kernel on CPU (TRITON_INTERPRET=1); no bf16 there")
    return DoctorItem(name="Triton interpreter", status="FAIL",
                      detail=str(facts.get("interpreter") or facts.get("error") or "no output")[:200],
                      fix="reinstall triton matching torch (pip install -U torch triton)")


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def check_cache(cache_dir: Path) -> DoctorItem:
    size = _dir_bytes(cache_dir) if cache_dir.exists() else 0
    probe = cache_dir if cache_dir.exists() else next((p for p in cache_dir.parents if p.exists()), Path("/"))
    detail = f"{cache_dir} ({size / 2**20:.1f} MiB)"
    if not os.access(probe, os.W_OK):
        return DoctorItem(name="compile cache", status="FAIL", detail=detail + ", not writable",
                          fix="set KILN_CACHE_DIR to a writable directory")
    if size > 20 * 2**30:
        return DoctorItem(name="compile cache", status="WARN", detail=detail, fix=f"rm -rf {cache_dir} to reclaim space")
    return DoctorItem(name="compile cache", status="OK", detail=detail)


def check_sandbox(bwrap: str | None = None) -> DoctorItem:
    """The OS sandbox for LLM-written code: which layers are in force here (kiln.tools.sandbox.box)."""
    from kiln.tools.sandbox.box import describe

    rec = describe(bwrap)
    version = f"bwrap {rec.bwrap_version}" if rec.bwrap else "no bwrap"
    detail = f"{version}, Landlock ABI {rec.landlock_abi}, {len(rec.layers)} of {len(rec.layers) + len(rec.missing)} layers"
    if rec.complete:
        return DoctorItem(name="sandbox", status="OK", detail=detail + " (--isolation strict can run)")
    gaps = "; ".join(f"{k}: {v}" for k, v in rec.missing.items())
    return DoctorItem(name="sandbox", status="WARN", detail=f"{detail}; missing {gaps}"[:400],
                      fix="apt-get install bubblewrap (or --bwrap PATH); until then --isolation strict refuses "
                          "and best-effort runs candidates with the layers above only")


def check_fork_servers() -> DoctorItem:
    """The resident fork servers of this user (kiln.tools.sandbox.resident) that answer now."""
    from kiln.tools.sandbox import resident

    if not resident.enabled():
        return DoctorItem(name="fork server", status="OK", detail=f"one per kiln process ({resident.MODE_ENV}=process)")
    live = resident.running()
    idle = f"stops after {resident.idle_s():.0f} s unused"
    if not live:
        return DoctorItem(name="fork server", status="OK", detail=f"resident: none running (the next check starts one; {idle})")
    pids = ", ".join(str(s["pid"]) for s in live)
    return DoctorItem(name="fork server", status="OK", detail=f"resident: {len(live)} running (pid {pids}; {idle})",
                      fix="kiln doctor --stop-servers stops them")


def collect(cache_dir: Path, bwrap: str | None = None) -> list[DoctorItem]:
    checks: list[Callable[[], DoctorItem]] = [check_python, check_gpu, check_cuda, check_fast_path, check_ninja,
                                              check_ncu, check_interpreter, lambda: check_cache(cache_dir),
                                              lambda: check_sandbox(bwrap), check_fork_servers]
    # side by side: the slow ones (torch's import here, the interpreter's subprocess, the sandbox probe)
    # overlap instead of adding up; the table keeps this order
    with ThreadPoolExecutor(max_workers=len(checks)) as pool:
        return list(pool.map(_safe, checks))


def _safe(fn: Callable[[], DoctorItem]) -> DoctorItem:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - one broken probe must not hide the others
        name = getattr(fn, "__name__", "check").removeprefix("check_")
        return DoctorItem(name=name, status="FAIL", detail=f"{type(exc).__name__}: {exc}"[:200])


def render(items: list[DoctorItem]) -> None:
    from rich.console import Console
    from rich.table import Table

    style = {"OK": "green", "WARN": "yellow", "FAIL": "red"}
    table = Table(title="kiln doctor")
    for col in ("item", "status", "detail", "fix"):
        table.add_column(col, overflow="fold")
    for it in items:
        table.add_row(it.name, f"[{style[it.status]}]{it.status}[/]", it.detail, it.fix)
    Console().print(table)


@o.described(bwrap="bubblewrap binary to probe (default: on PATH)")
def doctor(
    json_out: Annotated[bool, typer.Option("--json", help="print the items as JSON instead of a table")] = False,
    cache_dir: Annotated[Path | None, typer.Option("--cache-dir", help="compile cache to inspect (default: kiln's)")] = None,
    bwrap: o.Bwrap = None,
    stop_servers: Annotated[bool, typer.Option("--stop-servers", help="stop this user's resident fork servers first")] = False,
) -> None:
    """Check GPUs, driver, CUDA, nvcc, torch, Triton, Nsight Compute, the compile cache, the sandbox and
    the resident fork servers."""
    from kiln.tools.compile import default_cache_root

    if stop_servers:
        from kiln.tools.sandbox import resident

        print(f"kiln: stopped {resident.stop_all()} resident fork server(s)", file=sys.stderr)

    items = collect(cache_dir or default_cache_root(), bwrap)
    if json_out:
        print(json.dumps([it.model_dump() for it in items], indent=2))
    else:
        render(items)
    if any(it.status == "FAIL" for it in items):
        raise typer.Exit(1)
