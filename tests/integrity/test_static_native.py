"""The C++/CUDA host-code rules of the allowlist (issue 22, part 5): asm labels and statements,
symbol aliases, pybind11 under other names, the C library by allowlist (read from this machine's
libc), the C++ library's files, threads and processes, denied headers and CUDA entry points. Most
escapes passed main's scan (the rest, `getenv`, `fopen`, `mmap`, ..., are the issue's list, kept
together); every honest pattern (inline PTX in device code, the usual host wrapper) must pass."""

from __future__ import annotations

import pytest

from kiln.tools.integrity import native_policy as N
from kiln.tools.integrity.csource import scan_source
from kiln.tools.integrity.static import scan_candidate

ASM, INTRO, ENV = "static.cpp-asm", "static.introspection", "static.env-or-file"
ESCAPES = [
    (ASM, 'extern "C" int f(const char*) __asm__("PyRun_SimpleString");\nvoid g() { f("import os"); }'),
    (ASM, 'int f(const char*) asm("PyRun_SimpleString");'),
    (ASM, 'void g() { __asm volatile("syscall" ::: "memory"); }'),
    (ASM, 'extern "C" void f() __attribute__((weakref("PyRun_SimpleString")));'),
    (ASM, 'extern "C" void f() __attribute__((alias("g")));'),
    (ASM, '[[gnu::weakref("PyRun_SimpleString")]] static void f();'),
    (ASM, '__attribute__((constructor)) static void init() {}'),
    (ASM, '#pragma redefine_extname f PyRun_SimpleString\nextern "C" int f(const char*);'),
    (ASM, '#pragma weak f = g'),
    (ASM, '_Pragma("weak f = PyRun_SimpleString")'),
    (ASM, '#define __device__\n__device__ void g() { }'),
    (ASM, '#undef __global__'),
    (ASM, '__global__ void k() { asm volatile("// PyRun_SimpleString"); }'),
    (INTRO, 'using namespace pybind11;\nvoid g() { module_::import("sys"); }'),
    (INTRO, 'using namespace py;\nvoid g() { module_::import("sys"); }'),
    (INTRO, 'namespace q = pybind11;\nvoid g() { q::module_::import("sys"); }'),
    (INTRO, 'namespace q = py;'),
    (INTRO, '#define P pybind11\nvoid g() { P::module_::import("sys"); }'),
    (INTRO, '#define Q py\nvoid g() { Q::module_::import("sys"); }'),
    (INTRO, 'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n  m.def("f", &f);\n  decltype(m)::import("sys");\n}'),
    (INTRO, 'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n  m.import("sys");\n}'),
    (INTRO, 'PYBIND11_EMBEDDED_MODULE(x, m) {}'),
    (INTRO, 'PyObject* g(torch::Tensor t) { return THPVariable_Wrap(t); }'),
    (INTRO, 'void* h = dlsym(RTLD_DEFAULT, "PyRun_SimpleString");'),
    (ENV, 'void g() { symlink("/etc/passwd", "out.pt"); }'),
    (ENV, 'void g() { symlinkat("a", 3, "b"); link("a", "b"); linkat(3, "a", 3, "b", 0); }'),
    (ENV, 'extern "C" int renameat2(int, const char*, int, const char*, unsigned);\nvoid g() { renameat2(0, "a", 0, "b", 2); }'),
    (ENV, 'void g() { mkfifo("out.pt", 0600); mknod("x", 0, 0); }'),
    (ENV, 'void g() { char t[] = "xXXXXXX"; mkstemp(t); mkostemp(t, 0); tmpfile(); }'),
    (ENV, 'void g() { posix_fallocate(3, 0, 1 << 30); fallocate(3, 0, 0, 1); truncate("x", 0); ftruncate(3, 0); }'),
    (ENV, 'void g() { unlinkat(3, "x", 0); rmdir("d"); chmod("x", 0777); chown("x", 0, 0); }'),
    (ENV, 'extern char** environ;\nconst char* g() { return environ[0]; }'),
    (ENV, 'const char* g() { return getenv("HOME"); }'),
    (ENV, 'void g() { setenv("A", "b", 1); putenv((char*)"A=b"); }'),
    (ENV, 'void g() { auto p = &splice; (void)p; }'),
    (ENV, 'void g() { sendfile(1, 2, 0, 9); process_vm_readv(1, 0, 0, 0, 0, 0); process_vm_writev(1, 0, 0, 0, 0, 0); }'),
    (ENV, 'void g() { ::popen("id", "r"); ::system("id"); }'),
    (ENV, 'void g() { vfork(); clone(0, 0, 0, 0); ptrace(0, 0, 0, 0); prctl(0); }'),
    (ENV, 'void g() { signal(11, 0); sigaction(11, 0, 0); }'),
    (ENV, 'void g() { pthread_t t; pthread_create(&t, 0, 0, 0); }'),
    (ENV, 'void g() { void* p = mmap(0, 4096, 1, 1, 3, 0); (void)p; }'),
    (ENV, 'void g() { dlopen("libpython3.so", 2); }'),
    (ENV, 'void g() { FILE* f = fopen("x", "w"); (void)f; }'),
    (ENV, '#include <filesystem>\nvoid g() { std::filesystem::remove("x"); }'),
    (ENV, 'void g() { std::ofstream f("x"); std::ifstream h("y"); }'),
    (ENV, 'using namespace std;\nvoid g() { thread t([]{}); t.join(); }'),
    (ENV, 'void g() { auto f = std::async([]{ return 1; }); }'),
    (ENV, 'void g() { std::system("id"); std::getenv("HOME"); std::rename("a", "b"); }'),
    (ENV, '__host__ __device__ void g() { unlink("x"); }'),
    (ENV, '#include <unistd.h>\nvoid g() {}'),
    (ENV, '#include <sys/mman.h>\nvoid g() {}'),
    (ENV, 'void g() { cudaIpcOpenMemHandle(0, h, 1); }'),
    (ENV, 'void g() { cuModuleLoadData(&m, image); }'),
    (ENV, 'void g() { cudaGetDriverEntryPoint("cuLaunchHostFunc", &p, 0); }'),
]


@pytest.mark.parametrize(("rule", "src"), ESCAPES, ids=[f"{r}-{i}" for i, (r, _) in enumerate(ESCAPES)])
def test_native_escape_is_refused(rule: str, src: str) -> None:
    hits = {h.rule for h in scan_source(src, allowlist=True)}
    assert rule in hits, [(h.rule, h.token) for h in scan_source(src, allowlist=True)]


HOST = r'''#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <vector>
#include <algorithm>
#define THREADS 256
__device__ float lane_sum(float v) {
  unsigned lane; asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  asm volatile("bar.sync 0;");
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
  return v;
}
__global__ void k(const float* x, float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = expf(x[i]); }
static inline int ceil_div(int a, int b) { return (a + b - 1) / b; }
torch::Tensor f(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda(), "expects a CUDA tensor");
  at::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty_like(x);
  const int n = x.numel();
  dim3 block(THREADS), grid(ceil_div(n, THREADS));
  k<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, cudaGetErrorString(err));
  int64_t t = std::min<int64_t>(n, 1024); float s = sqrtf(2.0f) + fmaxf(1.f, 2.f);
  printf("%d %f\n", (int)t, s); fprintf(stderr, "ok\n"); fflush(stderr);
  std::vector<int64_t> sizes = {1, 2}; std::sort(sizes.begin(), sizes.end());
  void* scratch = malloc(16); memset(scratch, 0, 16); free(scratch);
  int dev = 0, sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024);
  return y;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("f", &f, "f", py::arg("x")); }
'''
HONEST = [HOST, "namespace py = pybind11;\nvoid g() {}", 'const char* msg = "expects a PyTorch tensor";',
          "using namespace std;\nint g(int a) { return max(a, 1); }"]


@pytest.mark.parametrize("src", HONEST, ids=[f"honest-{i}" for i in range(len(HONEST))])
def test_honest_host_code_passes(src: str) -> None:
    assert [(h.rule, h.token) for h in scan_source(src, allowlist=True) if h.rule != "static.downcast"] == []


def test_the_c_library_is_read_from_this_machine() -> None:
    names = N.libc_exports()
    assert len(names) > 1000  # the machine's libc, not the fallback list
    for name in ("symlink", "renameat2", "mkfifoat", "posix_fallocate", "process_vm_writev", "environ", "malloc"):
        assert name in names, name
    assert "malloc" in N.LIBC_ALLOWED and not N.is_math("symlink") and N.is_math("sqrtf") and N.is_math("__expf_finite")


def test_a_rejection_names_the_call_and_its_line() -> None:
    src = ('from torch.utils.cpp_extension import load_inline\nS = r"""\n#include <torch/extension.h>\n'
           'void g() {\n  symlink("a", "b");\n}\n"""\ne = load_inline(name="e", cpp_sources=S, functions=["g"])\n')
    (f,) = [f for f in scan_candidate(src, filename="c.py", dtype="fp32") if f.rule == ENV]
    assert f.severity == "reject" and "symlink" in f.evidence and f.line == 5


def test_denylist_mode_keeps_the_old_rules_only() -> None:
    assert "static.cpp-asm" not in {h.rule for h in scan_source('int f() asm("x");', allowlist=False)}
