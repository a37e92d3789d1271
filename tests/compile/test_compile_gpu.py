"""GPU tests (run on the H200 with -m gpu): the fast path launches and computes right, load_inline
re-checks hit the cache, and timing gives sane speedups and integrity numbers."""

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.gpu
KERNELS = Path(__file__).parents[1] / "fixtures" / "kernels"

SAXPY = r"""
extern "C" __global__ void saxpy(const float* x, float* y, float a, long long n, double bias) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i] + (float)bias;
}
"""
SMEM_REVERSE = r"""
extern "C" __global__ void reverse_block(const float* x, float* y, int n) {
    extern __shared__ float buf[];            // dynamic shared memory, one float per thread
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buf[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    int j = blockIdx.x * blockDim.x + (blockDim.x - 1 - threadIdx.x);
    if (j < n) y[j] = buf[threadIdx.x];
}
"""


def test_fast_path_launch_is_correct_and_compiles_fast(tmp_path):
    from kiln.tools.cuda import CudaKernel, f64, i64, set_cache_dir

    set_cache_dir(tmp_path)
    n = 1_000_003
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    expect = 2.5 * x + y + 0.25
    k = CudaKernel(SAXPY, "saxpy")
    t0 = time.perf_counter()
    k.launch(((n + 255) // 256,), (256,), [x, y, 2.5, i64(n), f64(0.25)])
    torch.cuda.synchronize()
    assert time.perf_counter() - t0 < 2.0
    assert k.record is not None and k.record.backend in ("nvrtc", "nvcc")
    torch.testing.assert_close(y, expect)
    k2 = CudaKernel(SAXPY, "saxpy")  # same source: cubin from the disk cache
    k2.launch(((n + 255) // 256,), (256,), [x, y, 0.0, i64(n), f64(0.0)])
    assert k2.record is not None and k2.record.cached


def test_fast_path_dynamic_shared_memory_and_side_stream(tmp_path):
    from kiln.tools.cuda import CudaKernel

    k = CudaKernel(SMEM_REVERSE, "reverse_block")
    x = torch.arange(1024, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):  # launches go to the current torch stream
        k.launch((4,), (256,), [x, y, 1024], shared_mem=256 * 4)
    s.synchronize()
    assert torch.equal(y.view(4, 256), x.view(4, 256).flip(1))


def test_fast_path_compile_error_is_classified():
    from kiln.tools.compile import classify_first_call_error
    from kiln.tools.cuda import CudaCompileError, CudaKernel

    k = CudaKernel(SAXPY.replace("a * x[i]", "a * xx[i]"), "saxpy")
    with pytest.raises(CudaCompileError) as info:
        k.launch((1,), (32,), [torch.zeros(1, device="cuda")] * 2 + [1.0, 1, 1.0])
    rec = classify_first_call_error(info.value)
    assert rec is not None and rec.errors[0].startswith("kernel.cu:4: error:") and "xx" in rec.errors[0]


def test_corpus_fast_path_softmax_matches_torch():
    from kiln.tools.compile.importer import _exec_module

    mod, _ = _exec_module(KERNELS / "correct" / "cuda" / "row_softmax_fast.py", "kiln_gpu_softmax_fast")
    x = torch.randn(37, 1000, device="cuda")
    torch.testing.assert_close(mod.ModelNew()(x), torch.softmax(x, -1), atol=1e-5, rtol=1e-5)


_IMPORT = textwrap.dedent("""\
    import json, sys, time
    from pathlib import Path
    from kiln.tools.compile import import_candidate
    t0 = time.perf_counter()
    mod, rec = import_candidate(Path(sys.argv[1]), device="cuda", cache_root=Path(sys.argv[2]))
    Path(sys.argv[3]).write_text(json.dumps({"rec": rec.model_dump(), "s": time.perf_counter() - t0}))
""")


def _import_in_subprocess(cand: Path, cache: Path, out: Path) -> dict:
    p = subprocess.run([sys.executable, "-c", _IMPORT, str(cand), str(cache), str(out)],
                       capture_output=True, text=True, timeout=240, env=dict(os.environ))
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(out.read_text())


def test_load_inline_second_check_hits_cache(tmp_path):
    cand = KERNELS / "correct" / "cuda" / "row_softmax_load_inline_kiln.py"
    cold = _import_in_subprocess(cand, tmp_path, tmp_path / "a.json")
    warm = _import_in_subprocess(cand, tmp_path, tmp_path / "b.json")
    print(f"load_inline kiln form: cold {cold['rec']['compile_s']:.1f} s, cached {warm['rec']['compile_s']:.2f} s")
    assert cold["rec"]["ok"] and not cold["rec"]["cached"]
    assert warm["rec"]["ok"] and warm["rec"]["cached"] and warm["rec"]["compile_s"] <= 1.0


def test_doc_fast_path_example_runs(tmp_path):
    import re

    doc = (Path(__file__).parents[2] / "docs" / "cuda-fast-path.md").read_text()
    example = tmp_path / "doc_fast_path.py"
    example.write_text(re.findall(r"```python\n(.*?)```", doc, re.S)[0])
    p = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-2000:]


def test_doc_load_inline_example_builds_and_runs(tmp_path):
    import re

    doc = (Path(__file__).parents[2] / "docs" / "cuda-fast-path.md").read_text()
    example = tmp_path / "doc_load_inline.py"
    example.write_text(re.findall(r"```python\n(.*?)```", doc, re.S)[1] + textwrap.dedent("""
        x = torch.randn(1000, device="cuda")
        torch.testing.assert_close(ModelNew()(x), x * x)
        print("ok")
    """))
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext")}
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=240, env=env)
    print(f"doc load_inline example (kiln form, no_implicit_headers): cold {time.perf_counter() - t0:.1f} s")
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-3000:]
