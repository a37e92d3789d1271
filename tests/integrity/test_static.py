"""The static scan: every rule, positive and negative, and the evasions it must see through."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kiln.tools.integrity.static import scan_candidate

CORPUS = Path(__file__).parents[1] / "fixtures" / "kernels"


def scan(src: str, dtype: str = "fp32") -> dict[str, set[str]]:
    """rule -> severities found."""
    out: dict[str, set[str]] = {}
    for f in scan_candidate(textwrap.dedent(src), filename="cand.py", dtype=dtype):
        out.setdefault(f.rule, set()).add(f.severity)
    return out


def rejects(src: str, dtype: str = "fp32") -> set[str]:
    return {r for r, sev in scan(src, dtype).items() if "reject" in sev}


FWD = "import torch\nimport torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"


def in_forward(body: str, head: str = "") -> str:
    return head + FWD + textwrap.indent(textwrap.dedent(body), " " * 8)


POSITIVE = [
    # try/except and exception swallowing
    ("static.try-except", in_forward("try:\n    return k(x)\nexcept Exception:\n    return torch.relu(x)\n")),
    ("static.try-except", in_forward("with contextlib.suppress(Exception):\n    k(x)\nreturn x\n", "import contextlib\n")),
    ("static.try-except", in_forward("with s(Exception):\n    k(x)\nreturn x\n", "from contextlib import suppress as s\n")),
    ("static.try-except", "class G:\n    def __exit__(self, *a):\n        return True\n"),
    # threads, processes, executors (also reached through __import__)
    ("static.threads", in_forward("threading.Thread(target=k).start()\nreturn x\n", "import threading\n")),
    ("static.threads", in_forward("ThreadPoolExecutor(1).submit(k, x)\nreturn x\n",
                                  "from concurrent.futures import ThreadPoolExecutor\n")),
    ("static.threads", in_forward("m = __import__('threa' + 'ding')\nm.Thread(target=k).start()\nreturn x\n")),
    ("static.threads", in_forward("os.fork()\nreturn x\n", "import os\n")),
    # streams, Python side, through aliases
    ("static.stream", in_forward("s = torch.cuda.Stream()\nreturn x\n")),
    ("static.stream", in_forward("s = T.cuda.Stream()\nreturn x\n", "import torch as T\n")),
    ("static.stream", in_forward("s = cuda.Stream()\nreturn x\n", "from torch import cuda\n")),
    ("static.stream", in_forward("c = getattr(torch, 'cuda')\ns = c.Stream()\nreturn x\n")),
    ("static.stream", in_forward("with torch.cuda.stream(self.s):\n    k(x)\nreturn x\n")),
    ("static.stream", in_forward("return getattr(torch.cuda, ''.join(['Str', 'eam']))()\n")),
    ("static.stream", in_forward("return operator.attrgetter('cuda.Stream')(torch)()\n", "import operator\n")),
    ("static.stream", in_forward("m = self.mod\nreturn getattr(m, 'Str' + 'eam')()\n")),
    ("static.introspection", in_forward("return getattr(self.f, '_get' + 'frame')(1)\n")),
    # streams in C++/CUDA source strings
    ("static.stream", 'from torch.utils.cpp_extension import load_inline\n'
                      'SRC = """\nvoid f() {\n  cudaStream_t s;\n  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);\n}\n"""\n'
                      'ext = load_inline(name="e", cpp_sources="", cuda_sources=SRC, functions=["f"])\n'),
    ("static.stream", 'from kiln.tools.cuda import CudaKernel\n'
                      'K = CudaKernel("__global__ void k(float* x){ }\\nvoid h(){ cudaStream" + "Create(0); }", "k")\n'),
    ("static.stream", 'from torch.utils.cpp_extension import load_inline\n'
                      'ext = load_inline(name="e", cpp_sources="int f();", cuda_sources="int f(){return 0;}",\n'
                      '                  functions=["f"], extra_cuda_cflags=["--default-stream=per-thread"])\n'),
    ("static.stream", 'S = """\n#define MK(a) a\n__global__ void k(){}\nvoid g(){ c10::cuda::CUDAStreamGuard guard(s); }\n"""\n'),
    # monkey-patching torch, time and timing objects
    ("static.monkey-patch", "import torch\ntorch.cuda.Event.elapsed_time = lambda a, b: 0.001\n"),
    ("static.monkey-patch", "import time\ntime.perf_counter = lambda: 0.0\n"),
    ("static.monkey-patch", "import torch\nsetattr(torch.cuda, 'synchronize', lambda: None)\n"),
    ("static.monkey-patch", "import torch\nT = torch\nT.matmul = lambda a, b: a\n"),
    ("static.monkey-patch", "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n"),
    ("static.monkey-patch", "import torch\ntorch.set_float32_matmul_precision('medium')\n"),
    ("static.monkey-patch", "import torch\ntorch.__dict__['softmax'] = None\n"),
    # introspection
    ("static.introspection", in_forward("f = sys._getframe(1)\nreturn x\n", "import sys\n")),
    ("static.introspection", in_forward("return inspect.stack()\n", "import inspect\n")),
    ("static.introspection", in_forward("objs = gc.get_objects()\nreturn x\n", "import gc\n")),
    ("static.introspection", in_forward("g = globals()\nreturn x\n")),
    ("static.introspection", in_forward("m = [v for v in sys.modules.values()]\nreturn x\n", "import sys\n")),
    ("static.introspection", "import __main__\n"),
    ("static.introspection", "from kiln.tools import timing\n"),
    ("static.introspection", in_forward("return x.grad_fn.__globals__\n")),
    ("static.introspection", in_forward("return eval('x')\n")),
    # environment, files
    ("static.env-or-file", in_forward("seed = os.environ.get('SEED')\nreturn x\n", "import os\n")),
    ("static.env-or-file", in_forward("return os.getenv('X')\n", "import os\n")),
    ("static.env-or-file", in_forward("return torch.load('/tmp/ref.pt')\n")),
    ("static.env-or-file", in_forward("return open('/tmp/ref').read()\n")),
    ("static.env-or-file", "import os\nos.environ['KILN_FAKE'] = '1'\n"),
    ("static.env-or-file", 'S = """\n__global__ void k(){}\nvoid h(){ const char* v = getenv("SEED"); }\n"""\n'),
    # tensor subclasses
    ("static.tensor-subclass", "import torch\nclass Lazy(torch.Tensor):\n    pass\n"),
    ("static.tensor-subclass", "import torch as T\nclass Lazy(T.Tensor):\n    pass\n"),
    ("static.tensor-subclass", "class W:\n    @classmethod\n    def __torch_function__(cls, f, t, a=(), k=None):\n        return 0\n"),
    ("static.tensor-subclass", in_forward("return x.as_subclass(W)\n")),
    # the reference Model
    ("static.reference-model", "from problem import Model\nclass ModelNew(Model):\n    pass\n"),
    ("static.reference-model", in_forward("return Model()(x)\n")),
    # dynamic torch attributes
    ("static.dynamic-torch-attr", in_forward("return getattr(torch, 'mat' + 'mul')(x, x)\n")),
    ("static.dynamic-torch-attr", in_forward("return getattr(torch, self.name)(x)\n")),
    ("static.dynamic-torch-attr", in_forward("return getattr(torch, 'lumtam'[::-1])(x, x)\n")),
    ("static.dynamic-torch-attr", in_forward("return torch.__dict__['softmax'](x, 1)\n")),
    ("static.dynamic-torch-attr", in_forward("return vars(torch)['softmax'](x, 1)\n")),
    ("static.dynamic-torch-attr", in_forward("return getattr(F, op)(x)\n", "import torch.nn.functional as F\nop = input()\n")),
    # C++ host code calling PyTorch compute, with no kernel of its own
    ("static.cpp-torch-op", 'from torch.utils.cpp_extension import load_inline\n'
                            'SRC = "torch::Tensor f(torch::Tensor x) { return torch::softmax(x, 1); }"\n'
                            'ext = load_inline(name="e", cpp_sources=SRC, functions=["f"])\n'),
    ("static.cpp-torch-op", 'SRC = "#include <torch/extension.h>\\nat::Tensor f(at::Tensor x) { return x.matmul(x); }"\n'),
]


@pytest.mark.parametrize(("rule", "src"), POSITIVE, ids=[f"{r}-{i}" for i, (r, _) in enumerate(POSITIVE)])
def test_rule_rejects(rule: str, src: str) -> None:
    assert rule in rejects(src), scan(src)


NEGATIVE = [
    ("static.try-except", "try:\n    import triton\nexcept ImportError:\n    triton = None\n"),
    ("static.stream", in_forward("s = torch.cuda.current_stream()\nreturn x\n")),
    ("static.stream", 'S = """\n// cudaStreamCreate(&s); commented out\n__global__ void k(float* x) { x[0] = 1.f; }\n"""\n'),
    ("static.stream", 'S = """\n__global__ void k(){}\nvoid h(){ const char* m = "cudaStreamCreate"; }\n"""\n'),
    ("static.monkey-patch", in_forward("self.w = x\nModelNew.BLOCK = 128\nreturn x\n")),
    ("static.introspection", "from kiln.tools.cuda import CudaKernel\n"),
    ("static.env-or-file", "import os\nos.environ['TORCH_CUDA_ARCH_LIST'] = '9.0'\n"),
    ("static.dynamic-torch-attr", in_forward("return getattr(self, 'weight')\n")),
    ("static.reference-model", "import torch.nn as nn\nclass ModelNew(nn.Module):\n    pass\n"),
    ("static.cpp-torch-op", 'S = """\n__global__ void k(float* x) { x[0] = 1.f; }\n'
                            'torch::Tensor f(torch::Tensor x) { auto y = torch::empty_like(x);\n'
                            '  k<<<1, 1, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>()); return y; }\n"""\n'),
]


@pytest.mark.parametrize(("rule", "src"), NEGATIVE, ids=[f"{r}-{i}" for i, (r, _) in enumerate(NEGATIVE)])
def test_rule_does_not_reject_honest_code(rule: str, src: str) -> None:
    assert rule not in rejects(src), scan(src)


def test_allowed_build_setting_is_a_warning() -> None:
    assert scan("import os\nos.environ['TORCH_CUDA_ARCH_LIST'] = '9.0'\n") == {"static.env-or-file": {"warn"}}


def test_literal_getattr_on_torch_is_a_warning() -> None:
    assert scan(in_forward("return getattr(torch, 'relu')(x)\n"))["static.dynamic-torch-attr"] == {"warn"}


def test_module_level_try_around_code_is_a_warning() -> None:
    assert scan("try:\n    x = compute()\nexcept Exception:\n    x = 0\n")["static.try-except"] == {"warn"}


def test_cpp_torch_op_next_to_a_launched_own_kernel_is_a_warning() -> None:
    src = ('S = """\n__global__ void k(float* x) { x[0] = 1.f; }\n'
           'torch::Tensor f(torch::Tensor x) { k<<<1, 1>>>(x.data_ptr<float>()); return torch::softmax(x, 1); }\n"""\n')
    assert scan(src)["static.cpp-torch-op"] == {"warn"}


def test_cpp_torch_op_next_to_a_kernel_never_launched_is_rejected() -> None:
    src = ('S = """\n__global__ void k(float* x) { x[0] = 1.f; }\n'
           'torch::Tensor f(torch::Tensor x) { return torch::softmax(x, 1); }\n"""\n')
    assert scan(src)["static.cpp-torch-op"] == {"reject"}


def test_downcast_is_a_finding_not_a_rejection_and_only_for_fp32() -> None:
    src = in_forward("return k(x.half())\n")
    assert scan(src)["static.downcast"] == {"warn"}
    assert "static.downcast" not in scan(src, dtype="fp16")
    c_src = 'S = """\n__global__ void k(__half* x) { x[0] = __float2half(1.f); }\n"""\n'
    assert scan(c_src)["static.downcast"] == {"warn"}


def test_triton_dot_precision() -> None:
    head = "import triton.language as tl\n"
    assert "static.downcast" in scan(head + "def k(a, b):\n    return tl.dot(a, b)\n")
    assert "static.downcast" not in scan(head + "def k(a, b):\n    return tl.dot(a, b, input_precision='ieee')\n")


def test_findings_carry_lines() -> None:
    src = "import torch\n\n\nS = torch.cuda.Stream()\n"
    (f,) = [f for f in scan_candidate(src, filename="c.py", dtype="fp32") if f.rule == "static.stream"]
    assert f.line == 4 and f.file == "c.py" and "Stream" in f.evidence


def test_c_source_line_maps_into_the_python_file() -> None:
    src = 'X = 1\nS = """\n__global__ void k(){}\nvoid h() {\n  cudaStreamCreate(0);\n}\n"""\n'
    (f,) = [f for f in scan_candidate(src, filename="c.py", dtype="fp32") if f.rule == "static.stream"]
    assert f.line == 5


def test_unparseable_source_gives_no_findings() -> None:
    assert scan_candidate("def (:\n", filename="c.py", dtype="fp32") == []


def test_opaque_source_is_reported() -> None:
    src = "from kiln.tools.cuda import CudaKernel\nK = CudaKernel(make_source(), 'k')\n"
    assert scan(src)["static.opaque-source"] == {"warn"}


@pytest.mark.parametrize("path", sorted(p.relative_to(CORPUS).as_posix() for p in CORPUS.glob("correct/*/*.py")))
def test_correct_corpus_has_no_rejections(path: str) -> None:
    assert rejects((CORPUS / path).read_text()) == set()


def test_kernelbench_style_honest_candidate_has_no_rejections() -> None:
    src = (Path(__file__).parent / "data" / "kb_style_relu_load_inline.py.txt").read_text()
    assert scan(src) == {"static.env-or-file": {"warn"}}  # only the TORCH_CUDA_ARCH_LIST build setting
