"""kiln's fast CUDA path: plain `extern "C"` CUDA source, compiled by NVRTC, launched on torch tensors.

A candidate writes its kernel as a string and launches it from `forward`:

    from kiln.tools.cuda import CudaKernel
    add = CudaKernel(SRC, "add_kernel")
    add.launch((blocks,), (256,), [x, y, out, n])

Compiling takes ~0.2 s with NVRTC (`cuda.bindings.nvrtc`; ~0.4 s through the `nvcc -cubin` fallback)
against ~20-50 s for a `load_inline` torch extension. The cubin is cached on disk by
sha256(source) + arch, and the loaded function in memory per device. Launches go to
`torch.cuda.current_stream()`. Arguments: a torch tensor -> its device pointer, int -> int32,
float -> float32, bool -> int32, `i64(x)` / `f64(x)` for 64-bit values, None -> a null pointer.
See docs/cuda-fast-path.md.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kiln.tools.compile.errors import log_tail, trim_errors
from kiln.tools.files import write_atomic
from kiln.tools.records import CompileRecord

_CACHE_DIR: Path | None = None
COMPILE_LOG: list[CompileRecord] = []
"""Every compile this process did (or found cached), in order: the worker reports them."""


class CudaCompileError(RuntimeError):
    """The kernel source did not compile. `.errors` holds the first errors as `kernel.cu:LINE: ...`."""

    def __init__(self, errors: list[str], log: str, backend: str) -> None:
        super().__init__("CUDA kernel failed to compile:\n" + "\n".join(errors))
        self.errors, self.log, self.backend = errors, log, backend


class CudaLaunchError(RuntimeError):
    """The driver refused a launch (bad grid/block, too much shared memory, a sticky fault)."""


@dataclass(frozen=True)
class i64:  # noqa: N801 - reads like a C type in kernel launch lists
    """Pass a Python int as a 64-bit integer kernel argument."""

    value: int


@dataclass(frozen=True)
class f64:  # noqa: N801 - reads like a C type in kernel launch lists
    """Pass a Python float as a double kernel argument."""

    value: float


def set_cache_dir(path: Path) -> None:
    """Where cubins are cached (the worker points this at the candidate's compile cache)."""
    global _CACHE_DIR
    _CACHE_DIR = Path(path)


def cache_dir() -> Path:
    if _CACHE_DIR is not None:
        return _CACHE_DIR
    from kiln.tools.compile.paths import default_cache_root

    return default_cache_root() / "cubin"


# ----------------------------------------------------------------------------- bindings


@functools.cache
def _bindings() -> tuple[Any, Any] | None:
    """(driver, nvrtc) from cuda-bindings (12.x+/13.x layout, then the older `cuda.cuda`), or None.
    Cached: it is on every launch's path."""
    try:
        from cuda.bindings import driver, nvrtc

        return driver, nvrtc
    except ImportError:
        pass
    try:  # cuda-python < 12.6 layout
        return importlib.import_module("cuda.cuda"), importlib.import_module("cuda.nvrtc")
    except ImportError:
        return None


def _check(result: tuple, what: str) -> Any:
    err, *rest = result
    if int(err) != 0:
        raise CudaLaunchError(f"{what} failed: {err!r}")
    return rest[0] if len(rest) == 1 else rest


def cuda_include_dirs() -> list[str]:
    """CUDA headers for NVRTC (cuda_fp16.h, cuda_bf16.h): CUDA_HOME, /usr/local/cuda, nvcc's dir."""
    roots = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(str(Path(nvcc).resolve().parent.parent))
    return [str(Path(r) / "include") for r in roots if r and (Path(r) / "include" / "cuda_fp16.h").exists()][:1]


# ----------------------------------------------------------------------------- compile


# NVRTC has no host <math.h>: give kernels the INFINITY / NAN macros nvcc's headers would provide.
_PRELUDE = """
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
"""


def nvrtc_compile(source: str, arch: str, *, name: str = "kernel.cu") -> bytes:
    """Compile to a cubin with NVRTC. Raises CudaCompileError with trimmed errors."""
    b = _bindings()
    if b is None:
        raise ImportError("cuda-bindings is not installed")
    nvrtc = b[1]
    prog = _check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 1, [_PRELUDE.encode()],
                                           [b"kiln_prelude.h"]), "nvrtcCreateProgram")
    opts = [f"--gpu-architecture={arch}", "--std=c++17", "-lineinfo", "--pre-include=kiln_prelude.h"]
    opts += [f"-I{d}" for d in cuda_include_dirs()]
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        log = _nvrtc_log(nvrtc, prog)
        if int(err) != 0:
            raise CudaCompileError(trim_errors(log) or [log.strip()[:500] or repr(err)], log, "nvrtc")
        size = _check(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        buf = b" " * size
        _check(nvrtc.nvrtcGetCUBIN(prog, buf), "nvrtcGetCUBIN")
        return buf
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _nvrtc_log(nvrtc: Any, prog: Any) -> str:
    size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
    buf = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return buf.rstrip(b"\x00").decode(errors="replace")


def nvcc_cubin(source: str, arch: str) -> bytes:
    """Fallback: `nvcc -cubin`. Raises CudaCompileError with trimmed errors."""
    if shutil.which("nvcc") is None:
        raise CudaCompileError(["neither cuda-bindings (NVRTC) nor nvcc is available"], "", "nvcc")
    with tempfile.TemporaryDirectory(prefix="kiln-cubin-") as tmp:
        src = Path(tmp) / "kernel.cu"
        src.write_text(source)
        argv = ["nvcc", "-cubin", f"-arch={arch}", "-std=c++17", "-lineinfo", "-o", str(src.with_suffix(".cubin")), str(src)]
        p = subprocess.run(argv, capture_output=True, text=True)
        log = p.stdout + p.stderr
        if p.returncode != 0:
            raise CudaCompileError(trim_errors(log) or [log.strip()[-500:]], log, "nvcc")
        return src.with_suffix(".cubin").read_bytes()


def compile_cubin(source: str, arch: str) -> tuple[bytes, CompileRecord]:
    """Cubin for `source` on `arch` ("sm_90"): from the disk cache, else NVRTC, else nvcc."""
    key = hashlib.sha256(source.encode()).hexdigest()[:24]
    path = cache_dir() / f"{key}-{arch}.cubin"
    t0 = time.perf_counter()
    if path.exists():
        rec = CompileRecord(ok=True, lang="cuda", backend="cubin-cache", cached=True,
                            compile_s=time.perf_counter() - t0)
        return path.read_bytes(), rec
    backend = "nvrtc" if _bindings() is not None else "nvcc"
    try:
        cubin = nvrtc_compile(source, arch) if backend == "nvrtc" else nvcc_cubin(source, arch)
    except CudaCompileError as exc:
        COMPILE_LOG.append(CompileRecord(ok=False, lang="cuda", backend=exc.backend, errors=exc.errors,
                                         log_tail=log_tail(exc.log), compile_s=time.perf_counter() - t0))
        raise
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, cubin)  # parallel candidates never read a half-written cubin
    return cubin, CompileRecord(ok=True, lang="cuda", backend=backend, compile_s=time.perf_counter() - t0)


# ----------------------------------------------------------------------------- launch


def _arg(a: Any) -> ctypes._SimpleCData:
    if a is None:
        return ctypes.c_void_p(0)
    if isinstance(a, i64):
        return ctypes.c_int64(a.value)
    if isinstance(a, f64):
        return ctypes.c_double(a.value)
    if isinstance(a, bool):
        return ctypes.c_int32(int(a))
    if isinstance(a, int):
        if not -(2**31) <= a < 2**31:
            raise ValueError(f"int argument {a} does not fit in int32: wrap it as i64({a})")
        return ctypes.c_int32(a)
    if isinstance(a, float):
        return ctypes.c_float(a)
    if hasattr(a, "data_ptr") and hasattr(a, "is_cuda"):
        if not a.is_cuda:
            raise ValueError("a CPU tensor was passed to a CUDA kernel: move it to the GPU first")
        return ctypes.c_void_p(a.data_ptr())
    raise TypeError(f"unsupported kernel argument type {type(a).__name__}: use a tensor, int, float, i64 or f64")


def _dims(d: tuple[int, ...], what: str) -> tuple[int, int, int]:
    dims = tuple(int(x) for x in d) + (1, 1, 1)
    if len(d) == 0 or len(d) > 3 or min(dims[:3]) < 1:
        raise ValueError(f"{what} must be 1 to 3 positive ints, got {d}")
    return dims[0], dims[1], dims[2]


class CudaKernel:
    """One `extern "C" __global__` function from `source`, compiled on first launch."""

    def __init__(self, source: str, name: str) -> None:
        self.source, self.name = source, name
        self._funcs: dict[int, Any] = {}
        self._modules: list[Any] = []
        self.record: CompileRecord | None = None

    def __deepcopy__(self, memo: dict) -> CudaKernel:
        return CudaKernel(self.source, self.name)  # driver handles don't copy; the cubin cache makes this cheap

    def __getstate__(self) -> dict:
        return {"source": self.source, "name": self.name}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["source"], state["name"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"CudaKernel({self.name!r}, sha256={hashlib.sha256(self.source.encode()).hexdigest()[:12]})"

    def _function(self, device_index: int) -> Any:
        if device_index in self._funcs:
            return self._funcs[device_index]
        import torch

        driver = _need_bindings()[0]
        major, minor = torch.cuda.get_device_capability(device_index)
        _ensure_context(driver, device_index)
        cubin, rec = compile_cubin(self.source, f"sm_{major}{minor}")
        image = ctypes.create_string_buffer(cubin, len(cubin))
        module = _check(driver.cuModuleLoadData(ctypes.addressof(image)), "cuModuleLoadData")
        self._modules.append(module)  # keep the module (and its functions) alive with the kernel
        try:
            func = _check(driver.cuModuleGetFunction(module, self.name.encode()), "cuModuleGetFunction")
        except CudaLaunchError as exc:
            raise CudaCompileError([f"kernel.cu: error: no extern \"C\" __global__ function named "
                                    f"'{self.name}' (is it declared extern \"C\"?)"], str(exc), rec.backend) from exc
        self.record = rec
        COMPILE_LOG.append(rec)
        self._funcs[device_index] = func
        return func

    def launch(self, grid: tuple[int, ...], block: tuple[int, ...], args: Sequence, shared_mem: int = 0) -> None:
        """Launch on the current torch stream of the current device."""
        import torch

        dev = torch.cuda.current_device()
        func = self._function(dev)
        driver = _need_bindings()[0]
        if shared_mem > 48 * 1024:
            attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            _check(driver.cuFuncSetAttribute(func, attr, shared_mem), "cuFuncSetAttribute")
        holders = [_arg(a) for a in args]
        ptrs = (ctypes.c_void_p * max(1, len(holders)))(*[ctypes.addressof(h) for h in holders])
        stream = driver.CUstream(torch.cuda.current_stream(dev).cuda_stream)
        _check(driver.cuLaunchKernel(func, *_dims(grid, "grid"), *_dims(block, "block"), shared_mem,
                                     stream, ctypes.addressof(ptrs), 0), f"launch of {self.name}")

    __call__ = launch


def _need_bindings() -> tuple[Any, Any]:
    b = _bindings()
    if b is None:
        raise CudaLaunchError("launching needs cuda-bindings (pip install cuda-bindings, or cuda-python)")
    return b


def _ensure_context(driver: Any, device_index: int) -> None:
    """Make torch's primary context current on this thread, so the module loads where torch runs."""
    import torch

    torch.cuda.init()
    torch.cuda.synchronize(device_index)  # torch's runtime has now made its primary context current
    _check(driver.cuInit(0), "cuInit")
    ctx = _check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if ctx is None or int(ctx) == 0:
        dev = _check(driver.cuDeviceGet(device_index), "cuDeviceGet")
        ctx = _check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        _check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
