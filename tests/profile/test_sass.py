"""SASS and ptxas summaries on real compiler output: nvcc/ptxas for CUDA, Triton's offline sm_90 build."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kiln.tools.profile import enrich, sass, toolchain

WORK = Path(__file__).parent / "workloads"

VEC4 = r"""
extern "C" __global__ void copy4(const float4* __restrict__ x, float4* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
"""
SPILL = r"""
extern "C" __global__ void spill(const float* x, float* y, int n) {
    float acc[96];
    #pragma unroll
    for (int j = 0; j < 96; ++j) acc[j] = x[threadIdx.x + j * n];
    float s = 0.f;
    for (int k = 0; k < n; ++k) {
        #pragma unroll
        for (int j = 0; j < 96; ++j) { acc[j] = acc[j] * acc[(j + k) % 96] + 1.f; }
    }
    for (int j = 0; j < 96; ++j) s += acc[j];
    y[threadIdx.x] = s;
}
"""
SHARED_LOOP = r"""
extern "C" __global__ void tile_sum(const float* x, float* y, int n) {
    __shared__ float t[256];
    float acc = 0.f;
    for (int k = 0; k < n; k += 256) {
        t[threadIdx.x] = x[k + threadIdx.x];
        __syncthreads();
        acc += t[(threadIdx.x * 7) % 256];
        __syncthreads();
    }
    y[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
"""

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None or toolchain.find_tool("cuobjdump") is None,
                                reason="needs nvcc and cuobjdump")


def _build(tmp_path: Path, src: str, extra: list[str] | None = None) -> tuple[dict, list]:
    cu, cubin = tmp_path / "k.cu", tmp_path / "k.cubin"
    cu.write_text(src)
    run = toolchain.ptxas_verbose(cu, cubin, arch="sm_90", extra=extra)
    assert run.ok, run.stderr
    dump = toolchain.dump_sass(cubin)
    assert dump.ok, dump.stderr
    return sass.parse_ptxas(run.stderr), sass.summarize_sass(dump.stdout)


@needs_nvcc
def test_vector_width_and_resources(tmp_path: Path) -> None:
    ptx, summaries = _build(tmp_path, VEC4)
    assert ptx["copy4"]["registers"] > 0 and ptx["copy4"]["spill_store_bytes"] == 0
    (s,) = summaries
    assert s.kernel == "copy4"
    assert s.global_load_widths_bits == {"128": 1} and s.global_store_widths_bits == {"128": 1}
    assert s.tensor_core == "none" and s.local_loads == s.local_stores == 0


@needs_nvcc
def test_spills_show_in_ptxas_and_sass(tmp_path: Path) -> None:
    ptx, (s,) = _build(tmp_path, SPILL, ["-maxrregcount=32"])
    assert ptx["spill"]["spill_store_bytes"] > 0
    assert s.local_stores > 0 and s.local_loads > 0


@needs_nvcc
def test_shared_memory_and_main_loop_mix(tmp_path: Path) -> None:
    _, (s,) = _build(tmp_path, SHARED_LOOP)
    assert s.shared_loads >= 1 and s.shared_stores >= 1
    assert s.loop_mix.get("shared_ld", 0) >= 1 and s.loop_mix.get("sync", 0) >= 1
    assert s.loop_mix.get("global_ld", 0) >= 1


def test_ptxas_parser_on_text() -> None:
    text = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k1' for 'sm_90'
ptxas info    : Function properties for k1
    16 bytes stack frame, 12 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 2048 bytes smem, 368 bytes cmem[0]
"""
    assert sass.parse_ptxas(text) == {"k1": {"stack_bytes": 16, "spill_store_bytes": 12, "spill_load_bytes": 8,
                                             "registers": 32, "shared_bytes": 2048}}


def test_cuda_sources_found_without_import() -> None:
    (src,) = enrich.cuda_sources_of(WORK / "scale_cuda.py")
    assert "scale_kernel" in src
    assert enrich.cuda_sources_of(WORK / "softmax_triton.py") == []
