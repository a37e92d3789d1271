"""Import a candidate from its real file inside the worker process, and classify build failures.

Runs in the candidate's own (isolated) worker process: it sets the process's torch-extension build
directory and CUDA arch list before the candidate's module body runs, because `load_inline` reads
them at build time. Candidate errors never raise out of here: they become a failed `CompileRecord`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import os
import sys
import time
from pathlib import Path
from types import ModuleType

from kiln.tools.compile.detect import cuda_backend, detect_lang
from kiln.tools.compile.errors import locate_in_source, log_tail, python_error, trim_errors, triton_error
from kiln.tools.files import load_module
from kiln.tools.records import CompileRecord, Lang

_LAST_IMPORTED: dict[str, str] = {}
"""source and file name of the candidate this process imported last: the default for classifying
its first-call errors (the worker imports exactly one candidate)."""


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def gpu_arch_list() -> str | None:
    """TORCH_CUDA_ARCH_LIST for the GPU this process sees ("9.0"), or None without a GPU."""
    import torch

    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return f"{major}.{minor}"


OWNER_FILE = ".kiln-build-pid"


_CLAIMS: dict[str, int] = {}  # ext dir -> the descriptor holding its claim (for this process's life)


def clear_stale_locks(ext_dir: Path) -> list[Path]:
    """Remove torch's build `lock` files that a killed worker left behind, then claim the dir.

    torch waits on that lock forever, so a candidate re-checked after its build timed out would hang
    until the compile deadline. A lock is stale when no live worker claims the dir: a claim is an
    flock on OWNER_FILE held for the worker's life (not a pid: sandboxed workers each run in their
    own PID namespace, where every worker has the same pid).
    """
    fd = os.open(ext_dir / OWNER_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # a live worker builds here: its lock is not stale
        os.close(fd)
        return []
    removed = []
    for lock in ext_dir.glob("*/lock"):
        lock.unlink(missing_ok=True)
        removed.append(lock)
    old = _CLAIMS.pop(str(ext_dir), None)
    if old is not None:
        os.close(old)
    _CLAIMS[str(ext_dir)] = fd
    return removed


def _prepare_cuda_build(source: str, device: str, cache_root: Path) -> tuple[Path, bool]:
    ext_dir = cache_root / "ext" / source_hash(source)[:16]
    ext_dir.mkdir(parents=True, exist_ok=True)
    clear_stale_locks(ext_dir)
    os.environ["TORCH_EXTENSIONS_DIR"] = str(ext_dir)
    arch = gpu_arch_list() if device != "cpu" else None
    if arch:
        os.environ["TORCH_CUDA_ARCH_LIST"] = arch
    from kiln.tools import cuda as fast_cuda

    fast_cuda.set_cache_dir(cache_root / "cubin")
    return ext_dir, any(ext_dir.rglob("*.so"))


def _exec_module(path: Path, name: str) -> tuple[ModuleType, str]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        module = load_module(path, name)
    return module, buf.getvalue()


def import_candidate(path: Path, *, device: str, cache_root: Path) -> tuple[ModuleType | None, CompileRecord]:
    """Import the candidate under a unique module name; build CUDA extensions in a hash-keyed dir."""
    path = Path(path)
    source = path.read_text()
    _LAST_IMPORTED.update(source=source, filename=path.name)
    lang = detect_lang(source)
    backend = _backend(lang, source, device)
    cached = False
    if lang == "cuda":
        _, cached = _prepare_cuda_build(source, device, cache_root)
    name = f"kiln_candidate_{source_hash(source)[:12]}_{os.getpid()}_{time.monotonic_ns()}"
    t0 = time.perf_counter()
    try:
        module, out = _exec_module(path, name)
    except BaseException as exc:  # noqa: BLE001 - any candidate failure at import is a compile record
        if isinstance(exc, KeyboardInterrupt):
            raise
        sys.modules.pop(name, None)
        rec = _failed_import(exc, source, path.name, lang, backend)
        rec.compile_s = time.perf_counter() - t0
        return None, rec
    rec = CompileRecord(ok=True, lang=lang, backend=backend, compile_s=time.perf_counter() - t0,
                        cached=cached, log_tail=log_tail(out))
    if not hasattr(module, "ModelNew"):
        rec.ok = False
        rec.errors = [f"{path.name}: no class ModelNew after import"]
    return module, rec


def _backend(lang: Lang, source: str, device: str) -> str:
    if lang == "triton":
        return "triton-interpreter" if device == "cpu" else "triton"
    return cuda_backend(source) if lang == "cuda" else lang


def _failed_import(exc: BaseException, source: str, filename: str, lang: Lang, backend: str) -> CompileRecord:
    rec = classify_first_call_error(exc, source=source, filename=filename)
    if rec is not None:
        rec.lang = lang
        rec.backend = rec.backend or backend
        return rec
    if isinstance(exc, SystemExit):
        msg = f"{filename}: the candidate called sys.exit({exc.code}) while being imported"
        return CompileRecord(ok=False, lang=lang, backend=backend, errors=[msg])
    text = f"{type(exc).__name__}: {exc}"
    errors = [python_error(exc, filename)]
    if isinstance(exc, ImportError) and "undefined symbol" in str(exc):
        errors.append("the extension built but does not link: a function declared in cpp_sources has no "
                      "definition in cuda_sources (check names and signatures)")
    return CompileRecord(ok=False, lang=lang, backend=backend, errors=errors,
                         log_tail=log_tail(text))


def classify_first_call_error(exc: BaseException, *, source: str | None = None,
                              filename: str = "candidate.py") -> CompileRecord | None:
    """A build error that surfaces when the candidate is imported or first called -> a failed record.

    Covers Triton `CompilationError` and `OutOfResources`, kiln's fast-path `CudaCompileError`,
    cupy's `CompileException`, and `load_inline`'s "Error building extension". Anything else
    (a wrong result, an illegal address, a Python bug in forward) returns None: not a compile error.
    """
    kind = {c.__name__ for c in type(exc).__mro__}
    text = str(exc)
    if source is None and _LAST_IMPORTED:
        source, filename = _LAST_IMPORTED["source"], _LAST_IMPORTED["filename"]
    if "CompilationError" in kind and type(exc).__module__.startswith("triton"):
        return CompileRecord(ok=False, lang="triton", backend="triton",
                             errors=[triton_error(text, source, filename)], log_tail=log_tail(text))
    cause = exc.__cause__ or exc.__context__
    if "InterpreterError" in kind and isinstance(cause, (NameError, AttributeError, TypeError, SyntaxError)):
        # under TRITON_INTERPRET=1 these are what the GPU compiler reports as a CompilationError
        return CompileRecord(ok=False, lang="triton", backend="triton-interpreter",
                             errors=[python_error(cause, filename)], log_tail=log_tail(text))
    if "OutOfResources" in kind:
        return CompileRecord(ok=False, lang="triton", backend="triton",
                             errors=[f"{filename}: error: {text.strip()} (reduce BLOCK sizes or num_stages)"])
    if "CudaCompileError" in kind:
        errs = list(getattr(exc, "errors", [])) or trim_errors(text) or [text.splitlines()[0]]
        errs = locate_in_source(errs, source, filename)
        return CompileRecord(ok=False, lang="cuda", backend=getattr(exc, "backend", "nvrtc"),
                             errors=errs, log_tail=log_tail(getattr(exc, "log", text)))
    if "CompileException" in kind:  # cupy
        return CompileRecord(ok=False, lang="cuda", backend="nvrtc",
                             errors=trim_errors(text) or [text.splitlines()[0]], log_tail=log_tail(text))
    if isinstance(exc, RuntimeError) and "Error building extension" in text:
        errs = locate_in_source(trim_errors(text), source, filename) or [text.splitlines()[0]]
        return CompileRecord(ok=False, lang="cuda", backend="load_inline", errors=errs, log_tail=log_tail(text))
    return None
