"""The allowlist (default static mode): every escape the held-out red team used, and more, is refused
with the right rule, a line and plain words; the patterns honest kernels use are not."""

from __future__ import annotations

import textwrap

import pytest

from kiln.tools.integrity.static import scan_candidate
from kiln.tools.integrity.static_allow import refusal

HEAD = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"


def rejects(src: str, mode: str = "allowlist") -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in scan_candidate(HEAD + textwrap.dedent(src), filename="cand.py", dtype="fp32", mode=mode):
        if f.severity == "reject":
            assert f.line and f.evidence, f
            out.setdefault(f.rule, []).append(f.evidence)
    return out


IMPORT = "static.import-not-allowed"
DYNAMIC = "static.dynamic-access"
ESCAPES = [
    # sys.modules through other names, and the modules that hand it out
    (IMPORT, "m = torch.sys.modules['kiln.tools.integrity.runtime']\n"),
    (IMPORT, "s = torch.sys\nm = s.modules\n"),
    (IMPORT, "import os\nm = os.sys.modules\n"),
    (IMPORT, "import typing\nm = typing.sys.modules\n"),
    (IMPORT, "import dataclasses\ni = dataclasses.inspect\n"),
    (IMPORT, "s = getattr(torch, 'sys')\n"),
    (IMPORT, "import pkgutil\nrt = pkgutil.resolve_name('kiln.tools.integrity.runtime')\n"),
    (IMPORT, "import pydoc\nrt = pydoc.locate('kiln.tools.integrity.runtime')\n"),
    (IMPORT, "import ctypes\nf = ctypes.PYFUNCTYPE(ctypes.py_object)(('PyImport_GetModuleDict', ctypes.pythonapi))\n"),
    (IMPORT, "from ctypes import pythonapi\n"),
    (IMPORT, "import sys\n"),
    (IMPORT, "import numpy as np\n"),
    (IMPORT, "import torch.nn.functional as F\nnp = F.np\n"),
    (IMPORT, "def f(x):\n    return x.numpy().sum()\n"),
    (IMPORT, "p = tl.extra.pkgutil\n"),
    (IMPORT, "b = tl.core.builtins\n"),
    # private torch internals, dispatch / profiler / hooks, launch patching
    (IMPORT, "on = torch._C._dispatch_tls_is_dispatch_key_included(torch._C.DispatchKey.Python)\n"),
    (IMPORT, "from torch import _C\n"),
    (IMPORT, "import torch._dynamo\n"),
    (IMPORT, "from torch.utils import checkpoint\n"),
    (IMPORT, "x = torch.Tensor._base\n"),
    (IMPORT, "d = triton.runtime.driver.active\n"),
    (IMPORT, "h = triton.knobs.runtime\n"),
    (IMPORT, "e = torch.cuda.Event(enable_timing=True)\n"),
    (IMPORT, "torch.cuda.manual_seed(0)\n"),
    (IMPORT, "g = torch.Generator().manual_seed(42)\n"),
    (IMPORT, "f = torch.compile(lambda x: x)\n"),
    (IMPORT, "lib = torch.library.Library('aten', 'IMPL')\n"),
    (IMPORT, "torch.ops.load_library('x.so')\n"),
    (IMPORT, "nn.modules.module.register_module_forward_hook(print)\n"),
    (IMPORT, "t = torch.from_numpy\n"),
    (IMPORT, "from torch import *\n"),
    (IMPORT, "from . import helper\n"),
    (IMPORT, "from typing import get_type_hints\n"),
    # dynamic access and code execution
    (DYNAMIC, "def f(x, n):\n    return getattr(x, n)\n"),
    (DYNAMIC, "def f(x):\n    return getattr(x, bytes([115, 121, 115]).decode())\n"),
    (DYNAMIC, "def f(x, n):\n    return hasattr(x, n)\n"),
    (DYNAMIC, "def f(x, n, v):\n    setattr(x, n, v)\n"),
    (DYNAMIC, "g = getattr\n"),
    (DYNAMIC, "import functools\ng = functools.partial(getattr, torch)\n"),
    (DYNAMIC, "def f(m):\n    return m.sys\nf(torch)\n"),
    (DYNAMIC, "ms = [torch]\n"),
    (DYNAMIC, "class A:\n    def __init__(self):\n        self.t = torch\n"),
    (DYNAMIC, "def f(x):\n    return x.__class__\n"),
    (DYNAMIC, "c = ().__class__.__base__\n"),
    (DYNAMIC, "d = nn.functional.__dict__\n"),
    (DYNAMIC, "def f(x):\n    return type(x)\n"),
    (DYNAMIC, "d = dir(torch)\n"),
    (DYNAMIC, "x = __loader__\n"),
    (DYNAMIC, "class A(nn.Module):\n    def f(self):\n        return super().__getattribute__('w')\n"),
    (DYNAMIC, "def __getattr__(name):\n    return 1\n"),
    (DYNAMIC, "class A:\n    def __del__(self):\n        pass\n"),
    (DYNAMIC, "class A:\n    def __init_subclass__(cls):\n        pass\n"),
    (DYNAMIC, "class A(nn.Module, metaclass=object):\n    pass\n"),
    (DYNAMIC, "s = '{0.__init__.__globals__}'.format(nn.Module)\n"),
    (DYNAMIC, "def f():\n    e = ValueError()\n    return e.__traceback__\n"),
    ("static.builtin-not-allowed", "m = memoryview(bytes(4))\n"),
    ("static.builtin-not-allowed", "y = mystery_helper(1)\n"),
    ("static.monkey-patch", "@triton.jit\ndef k(x):\n    pass\nk.run = print\n"),
    ("static.monkey-patch", "@triton.jit\ndef k(x):\n    pass\nsetattr(k, 'run', print)\n"),
    # the denylist's ids still explain what they know
    ("static.introspection", "e = eval('1')\n"),
    ("static.introspection", "import inspect\n"),
    ("static.env-or-file", "t = open('/etc/hostname').read()\n"),
    # C++ reaching Python
    ("static.introspection", 'S = "#include <torch/extension.h>\\nvoid f() { PyObject* d = PyImport_GetModuleDict(); }"\n'),
    ("static.introspection", 'S = "#include <torch/extension.h>\\nvoid f() { auto m = py::module_::import(\\"sys\\"); }"\n'),
    ("static.monkey-patch", 'S = "#include <torch/extension.h>\\nTORCH_LIBRARY_IMPL(aten, CUDA, m) { m.impl(\\"relu\\", &f); }"\n'),
    ("static.cpp-torch-op", 'S = "#include <torch/extension.h>\\ntorch::Tensor f(torch::Tensor a) { cublasSgemm(h); return a; }"\n'),
    (DYNAMIC, "def f(x):\n    return getattr(x, '__class__')\n"),
    # the compiler as a file reader: its errors quote the file back
    ("static.env-or-file", 'S = "#include <torch/extension.h>\\n#include \\"/home/u/.netrc\\"\\n__global__ void k() {}"\n'),
    ("static.env-or-file", 'S = "#include <../../../etc/hostname>\\n__global__ void k() {}"\n'),
    ("static.env-or-file", "from torch.utils.cpp_extension import load_inline\n"
                           "e = load_inline(name='e', cpp_sources='', functions=[], extra_cflags=['-include/etc/hostname'])\n"),
    ("static.env-or-file", "from torch.utils.cpp_extension import load_inline\n"
                           "e = load_inline(name='e', cpp_sources='', functions=[], build_directory='/tmp/x')\n"),
]


@pytest.mark.parametrize(("rule", "src"), ESCAPES, ids=[f"{r}-{i}" for i, (r, _) in enumerate(ESCAPES)])
def test_escape_is_refused(rule: str, src: str) -> None:
    assert rule in rejects(src), rejects(src)


HONEST = [
    "class ModelNew(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n        self.n = n\n",
    "class ModelNew(nn.Module):\n    def __init__(self):\n        nn.Module.__init__(self)\n",
    "from __future__ import annotations\nimport math\nfrom typing import Optional, Tuple\nx: Optional[int] = math.floor(2.5)\n",
    "import torch.nn.functional as F\ndef f(x, w):\n    return F.gelu(F.linear(x, w))\n",
    "from torch.nn import functional as F\ny = F.softmax\n",
    "from triton.language.extra import libdevice\nfrom triton.language.extra.cuda import libdevice as ld\nf = (libdevice.tanh, ld.erf)\n",
    "def f(x):\n    return tl.math.exp2(x) + tl.extra.cuda.libdevice.tanh(x)\n",
    "sms = torch.cuda.get_device_properties(0).multi_processor_count\ns = torch.cuda.current_stream()\n",
    "@triton.autotune(configs=[triton.Config({'BLOCK': 128}, num_warps=4)], key=['n'])\n@triton.jit\n"
    "def k(x_ptr, n, BLOCK: tl.constexpr):\n    pass\n",
    "class M(nn.Module):\n    def f(self, x):\n        return getattr(self, 'weight', None), hasattr(x, 'shape')\n",
    "import functools\n@functools.lru_cache(maxsize=None)\ndef cfg(n):\n    return triton.next_power_of_2(n)\n",
    "from dataclasses import dataclass\n@dataclass\nclass Cfg:\n    block: int = 128\n    def __post_init__(self):\n        pass\n",
    "class F(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n        ctx.save_for_backward(x)\n        return x\n",
    "v = (torch.version.cuda, torch.__version__, torch.float32, torch.bfloat16, torch.pi)\n",
    "import os\nos.environ['TORCH_CUDA_ARCH_LIST'] = '9.0'\n",
    "from torch.utils.cpp_extension import load_inline\nfrom kiln.tools.cuda import CudaKernel, i64\n",
    "def f(x):\n    if x.dim() != 2:\n        raise ValueError(f'bad shape {tuple(x.shape)}')\n    return [i * 2 for i in range(len(x))]\n",
    "if __name__ == '__main__':\n    import time\n    print(time.perf_counter())\n",
    "__all__ = ['ModelNew']\n",
    "def f(x):\n    return torch.matmul(x, x.t()).to(torch.float16).float()\n",
    'S = "#include \\"cuda_fp16.h\\"\\n#include <c10/cuda/CUDAStream.h>\\n__global__ void k(__half* x) { }"\n',
    "from torch.utils.cpp_extension import load_inline\n"
    "e = load_inline(name='e', cpp_sources='', functions=[], extra_cuda_cflags=['-O3', '--use_fast_math'],\n"
    "                extra_ldflags=['-lcublas'])\n",
    'S = "#include <torch/extension.h>\\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\\"f\\", &f, py::arg(\\"x\\")); }"\n',
]


@pytest.mark.parametrize("src", HONEST, ids=[f"honest-{i}" for i in range(len(HONEST))])
def test_honest_patterns_pass(src: str) -> None:
    assert rejects(src) == {}


def test_denylist_mode_is_the_old_scan_for_trusted_kernels() -> None:
    src = "import numpy as np\ndef f(x):\n    return torch.sys.modules\n"
    assert rejects(src, mode="denylist") == {}
    assert IMPORT in rejects(src)


def test_unknown_mode_is_an_error() -> None:
    with pytest.raises(ValueError, match="allowlist, denylist"):
        scan_candidate("x = 1\n", filename="c.py", dtype="fp32", mode="permissive")


def test_a_line_the_denylist_explains_gets_no_second_reason() -> None:
    findings = [f for f in scan_candidate(HEAD + "import threading\n", filename="c.py", dtype="fp32")
                if f.severity == "reject"]
    assert [f.rule for f in findings] == ["static.threads"]


def test_refusals_say_what_and_why() -> None:
    assert refusal("torch.nn.functional.relu") is None and refusal("numpy.load") is None
    assert "torch.sys is not on the allowlist" in (refusal("torch.sys.modules") or "")
    assert "private part of torch" in (refusal("torch._C._get_tracing_state") or "")
    assert "get_device_properties" in (refusal("triton.runtime.driver") or "")
    assert "reaches the private attribute _base" in (refusal("torch.Tensor._base") or "")


def test_evidence_names_the_allowed_modules() -> None:
    (ev,) = rejects("import pkgutil\n")[IMPORT]
    assert "pkgutil" in ev and "torch" in ev and "triton" in ev and "kiln.tools.cuda" in ev
