"""CPU bonus: compile a CUDA candidate's sources with nvcc without running anything.

The only place in kiln.tools.compile that spawns nvcc. Sources are found statically
(`extract_cuda_sources`), so the candidate's Python never runs on the CPU machine.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from kiln.tools.compile.detect import cuda_backend, extract_cuda_sources
from kiln.tools.compile.errors import locate_in_source, log_tail, trim_errors
from kiln.tools.records import CompileRecord

DEFAULT_ARCH = "sm_90"  # the H200 kiln is benchmarked on; pass the GPU's own arch when known


def _torch_includes() -> list[str]:
    import sysconfig

    from torch.utils.cpp_extension import include_paths

    return [f"-I{p}" for p in include_paths()] + [f"-I{sysconfig.get_paths()['include']}"]


def nvcc_argv(src: Path, *, arch: str, kind: str) -> list[str]:
    """nvcc command for one source: fast-path kernels to a cubin, load_inline .cu to an object."""
    if kind == "kernel":
        return ["nvcc", "-cubin", f"-arch={arch}", "-std=c++17", "-o", str(src.with_suffix(".cubin")), str(src)]
    argv = ["nvcc", "-c", f"-arch={arch}", "-std=c++17", "-DTORCH_EXTENSION_NAME=kiln_check",
            "-o", str(src.with_suffix(".o")), str(src)]
    if "torch/" in src.read_text() or "ATen/" in src.read_text():
        argv[1:1] = _torch_includes()
    return argv


def run_nvcc(argv: list[str], timeout_s: float = 300.0) -> tuple[int, str]:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return 124, f"nvcc fatal : timed out after {timeout_s:.0f} s"
    return p.returncode, p.stdout + p.stderr


def nvcc_compile_check(path: Path, *, arch: str = DEFAULT_ARCH) -> CompileRecord:
    """Compile every CUDA source the candidate holds (load_inline .cu parts, fast-path kernels).

    C++ (`cpp_sources`) parts are not compiled: they need the full torch extension build.
    """
    source = Path(path).read_text()
    rec = CompileRecord(lang="cuda", backend=f"nvcc-check:{cuda_backend(source)}")
    if shutil.which("nvcc") is None:
        rec.errors = ["nvcc not found on PATH: install the CUDA toolkit to compile-check CUDA candidates"]
        return rec
    try:
        found = extract_cuda_sources(source)
    except SyntaxError as exc:
        rec.errors = [f"{Path(path).name}:{exc.lineno}: SyntaxError: {exc.msg}"]
        return rec
    jobs = [("kernel", s) for s in found["kernel"]] + [("cuda", s) for s in found["cuda"]]
    if not jobs:
        rec.errors = [f"{Path(path).name}: no CUDA source string found (cuda_sources= or CudaKernel(...))"]
        return rec
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kiln-nvcc-") as tmp:
        logs = [_compile_one(Path(tmp), i, kind, src, arch) for i, (kind, src) in enumerate(jobs)]
    rec.compile_s = time.perf_counter() - t0
    failed = [log for rc, log in logs if rc != 0]
    rec.ok = not failed
    rec.errors = locate_in_source(trim_errors("\n".join(failed)), source, Path(path).name) if failed else []
    missing = _missing_toolkit_header("\n".join(failed), source)
    if missing:
        rec.backend = "nvcc-check:inconclusive"
        rec.errors = [f"compile check inconclusive: this machine's CUDA toolkit lacks {missing}, which "
                      "torch's CUDA headers include; this is not an error in the candidate"]
    if failed and not rec.errors:
        rec.errors = [failed[0].strip().splitlines()[-1] if failed[0].strip() else "nvcc failed"]
    rec.log_tail = log_tail("\n".join(log for _, log in logs))
    return rec


_MISSING = re.compile(r"fatal error: ((?:cusparse|cublas\w*|cusolver\w*|curand\w*|cufft\w*|nvToolsExt)\.h): "
                      r"No such file or directory")


def _missing_toolkit_header(log: str, source: str) -> str | None:
    """A CUDA library header that torch's headers need but this toolkit lacks (a minimal nvcc install)."""
    m = _MISSING.search(log)
    return m.group(1) if m and m.group(1) not in source else None


def _compile_one(tmp: Path, i: int, kind: str, src: str, arch: str) -> tuple[int, str]:
    name = "kernel.cu" if kind == "kernel" else "cuda.cu"
    path = tmp / str(i) / name
    path.parent.mkdir()
    path.write_text(src)
    return run_nvcc(nvcc_argv(path, arch=arch, kind=kind))
