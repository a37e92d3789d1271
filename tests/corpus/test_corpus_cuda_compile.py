"""Every CUDA fixture's plain CUDA part (`CUDA_SRC`) compiles with nvcc for sm_90, except the ones
meant not to compile; load_inline wiring is consistent. No torch headers are compiled here."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from .corpus_lib import KERNELS, entry_id, load_manifest, run_parallel, string_constants

CUDA = list({e["path"]: e for e in load_manifest() if e["lang"] == "cuda"}.values())
NVCC = shutil.which("nvcc")


@pytest.fixture(scope="module")
def nvcc_results(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """`nvcc -cubin` of every CUDA_SRC, two at a time."""
    root = tmp_path_factory.mktemp("nvcc")

    def compile_one(entry):
        work = root / entry_id(entry).replace("/", "_")
        work.mkdir()
        src = work / "kernel.cu"
        src.write_text(string_constants(KERNELS / entry["path"])["CUDA_SRC"])
        argv = [NVCC, "-cubin", "-arch=sm_90", "-std=c++17", "-o", str(work / "k.cubin"), str(src)]
        return entry["path"], subprocess.run(argv, capture_output=True, text=True, timeout=120)

    return dict(run_parallel(CUDA, compile_one))


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
@pytest.mark.parametrize("entry", CUDA, ids=entry_id)
def test_cuda_src_compiles_with_nvcc(nvcc_results, entry):
    proc = nvcc_results[entry["path"]]
    if entry["expect_status"] == "compile_error":
        assert proc.returncode != 0
        assert re.search(r"kernel\.cu\(\d+\): error", proc.stderr), proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr[-2000:]


# NVRTC (the fast path's compiler) sees no host headers: these come from math.h / float.h and
# compile under nvcc but not under NVRTC.
HOST_HEADER_MACROS = re.compile(r"\b(INFINITY|NAN|HUGE_VALF?|FLT_MAX|FLT_MIN|FLT_EPSILON|DBL_MAX|M_PI)\b")


@pytest.mark.parametrize("entry", [e for e in CUDA if e["form"] == "fast"], ids=entry_id)
def test_fast_path_source_is_nvrtc_clean(entry):
    cuda = string_constants(KERNELS / entry["path"])["CUDA_SRC"]
    assert not HOST_HEADER_MACROS.search(cuda), HOST_HEADER_MACROS.search(cuda).group(0)
    assert "#include" not in cuda


@pytest.mark.parametrize("entry", [e for e in CUDA if e["form"] == "fast"], ids=entry_id)
def test_fast_path_kernel_names_exist(entry):
    source = (KERNELS / entry["path"]).read_text()
    cuda = string_constants(KERNELS / entry["path"])["CUDA_SRC"]
    for name in re.findall(r'CudaKernel\(CUDA_SRC, "(\w+)"\)', source):
        assert re.search(rf'extern "C" __global__ void {name}\(', cuda), name


@pytest.mark.parametrize("entry", [e for e in CUDA if e["form"] == "load_inline"], ids=entry_id)
def test_load_inline_functions_are_defined(entry):
    strings = string_constants(KERNELS / entry["path"])
    host = strings.get("HOST_SRC", "") + strings.get("CPP_SRC", "")
    assert host, "no HOST_SRC / CPP_SRC"
    source = (KERNELS / entry["path"]).read_text()
    functions = re.search(r"functions=\[([^\]]*)\]", source).group(1)
    for name in re.findall(r'"(\w+)"', functions):
        assert re.search(rf"torch::Tensor {name}\(", host), name
    kiln_form = "CPP_SRC" in strings
    assert ("#include <torch/extension.h>" in strings["CUDA_SRC"]) is False
    assert kiln_form == entry["path"].endswith("_kiln.py")
