"""Real nvcc on the CPU machine: the compile-check bonus and the fast path's nvcc fallback + cache."""

import shutil
import textwrap
import time

import pytest

from kiln.tools import cuda
from kiln.tools.compile import nvcc_compile_check

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")

GOOD = textwrap.dedent("""\
    extern "C" __global__ void scale(float* x, float a, long long n) {
        long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
        if (i < n) x[i] *= a;
    }
""")
BAD = GOOD.replace("x[i] *= a;", "x[i] *= not_declared;")


def _cand(tmp_path, src, kind="fast"):
    p = tmp_path / "cand.py"
    if kind == "fast":
        body = f'from kiln.tools.cuda import CudaKernel\nSRC = r"""{src}"""\nK = CudaKernel(SRC, "scale")\n'
    else:
        body = ("from torch.utils.cpp_extension import load_inline\n"
                f'CU = r"""{src}"""\nCPP = "void f();"\n'
                'ext = load_inline(name="x", cpp_sources=CPP, cuda_sources=CU, functions=["f"])\n')
    p.write_text(body)
    return p


def test_nvcc_check_passes_good_fast_path(tmp_path):
    rec = nvcc_compile_check(_cand(tmp_path, GOOD))
    assert rec.ok, rec.errors
    assert rec.backend == "nvcc-check:nvrtc" and rec.compile_s is not None


def test_nvcc_check_reports_first_error_with_line(tmp_path):
    rec = nvcc_compile_check(_cand(tmp_path, BAD, kind="load_inline"))
    assert not rec.ok
    assert rec.errors[0].startswith("cuda.cu:3 (cand.py:4): error:") and "not_declared" in rec.errors[0], rec.errors


def test_nvcc_check_no_source(tmp_path):
    p = tmp_path / "cand.py"
    p.write_text("import torch\n")
    rec = nvcc_compile_check(p)
    assert not rec.ok and "no CUDA source" in rec.errors[0]


def test_cubin_cache_hit_is_fast_and_keyed_by_arch(tmp_path, monkeypatch):
    monkeypatch.setattr(cuda, "_bindings", lambda: None)  # this machine has no cuda-bindings: nvcc fallback
    cuda.set_cache_dir(tmp_path / "cubin")
    blob, rec = cuda.compile_cubin(GOOD, "sm_90")
    assert rec.ok and not rec.cached and rec.backend == "nvcc" and blob[:4] == b"\x7fELF"
    t0 = time.perf_counter()
    blob2, rec2 = cuda.compile_cubin(GOOD, "sm_90")
    assert rec2.cached and blob2 == blob and time.perf_counter() - t0 < 0.5
    assert len(list((tmp_path / "cubin").glob("*-sm_90.cubin"))) == 1
    cuda.compile_cubin(GOOD, "sm_80")
    assert len(list((tmp_path / "cubin").glob("*.cubin"))) == 2


def test_fast_path_compile_error_is_trimmed(tmp_path, monkeypatch):
    monkeypatch.setattr(cuda, "_bindings", lambda: None)
    cuda.set_cache_dir(tmp_path / "cubin")
    with pytest.raises(cuda.CudaCompileError) as info:
        cuda.compile_cubin(BAD, "sm_90")
    assert info.value.errors[0].startswith("kernel.cu:3: error:")
    from kiln.tools.compile import classify_first_call_error

    rec = classify_first_call_error(info.value)
    assert rec is not None and rec.backend == "nvcc" and rec.errors == info.value.errors


def test_launch_argument_conversion():
    assert cuda._arg(3).value == 3 and cuda._arg(cuda.i64(2**40)).value == 2**40
    assert abs(cuda._arg(0.5).value - 0.5) < 1e-9 and cuda._arg(cuda.f64(0.1)).value == 0.1
    with pytest.raises(ValueError, match="i64"):
        cuda._arg(2**40)
    import torch

    with pytest.raises(ValueError, match="CPU tensor"):
        cuda._arg(torch.zeros(2))
    with pytest.raises(ValueError, match="grid"):
        cuda._dims((), "grid")


def test_missing_toolkit_header_is_inconclusive_not_a_candidate_error():
    from kiln.tools.compile.nvcc_check import _missing_toolkit_header

    log = "/x/torch/include/ATen/cuda/CUDAContextLight.h:10:10: fatal error: cusparse.h: No such file or directory"
    assert _missing_toolkit_header(log, "#include <torch/extension.h>") == "cusparse.h"
    assert _missing_toolkit_header(log, '#include "cusparse.h"') is None  # the candidate asked for it
    assert _missing_toolkit_header("k.cu(3): error: x", "") is None


def test_kernel_object_copies_and_pickles_without_driver_handles():
    import copy
    import pickle

    k = cuda.CudaKernel(GOOD, "scale")
    k._funcs[0] = object()  # stands in for a loaded CUfunction
    for k2 in (copy.deepcopy(k), pickle.loads(pickle.dumps(k))):
        assert k2.source == GOOD and k2.name == "scale" and k2._funcs == {}
    assert repr(k).startswith("CudaKernel('scale', sha256=")
