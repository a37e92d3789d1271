"""The allowlist static policy, attacked as a smart attacker would once it exists: reach forbidden
things using only imports it must keep (torch, triton, typing, datetime) and literal attribute
names, or C++ host code in a CUDA candidate (allowed for kernels, and native code can do
anything). Each snippet is the working core of an attack (the pipeline tests run whole candidates
built on the same routes); the scan alone must reject it. Fast: no worker, no kernel."""

from __future__ import annotations

import pytest

from kiln.tools.integrity.static import scan_candidate

HEAD = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"
CPP = 'from torch.utils.cpp_extension import load_inline\nCPP = r"""\n{body}\n"""\n' \
      'ext = load_inline(name="redteam", cpp_sources=CPP, functions=["pwn"])\n'

# (id, snippet): each reaches something no kernel needs through a route an allowlist might keep
ROUTES = [
    ("torch.sys.modules", 'm = torch.sys.modules["kiln.tools.integrity.runtime"]\nm.judge = len\n'),
    ("torch.os.environ", 'key = torch.os.environ["OPENAI_API_KEY"]\n'),
    ("torch.os.system", 'torch.os.system("id > /tmp/pwned")\n'),
    ("torch.os.fork", "pid = torch.os.fork()\n"),
    ("torch.os.kill", "torch.os.kill(torch.os.getppid(), 9)\n"),
    ("torch.builtins.open", 'job = torch.builtins.open("job.json").read()\n'),
    ("torch.builtins.__import__", 'socket = torch.builtins.__import__("socket")\n'),
    ("torch.builtins.exec", 'torch.builtins.exec("import sys")\n'),
    ("torch.importlib", 'kiln = torch.importlib.import_module("kiln.tools.check.worker")\n'),
    ("torch.ctypes", "libc = torch.ctypes.CDLL(None)\n"),
    ("torch.inspect", "frame = torch.inspect.currentframe()\n"),
    ("cpp_extension.subprocess", 'torch.utils.cpp_extension.subprocess.run(["id"])\n'),
    ("cpp_extension.os", 'names = torch.utils.cpp_extension.os.listdir("..")\n'),
    ("torch.serialization.load", 'ref = torch.serialization.load("../r-x/out/problem.x1.0.pt")\n'),
    ("torch.serialization.save", 'torch.serialization.save({}, "../r-x/out/problem.x1.0.pt")\n'),
    ("torch.distributed.TCPStore", 'store = torch.distributed.TCPStore("127.0.0.1", 4242, is_master=False)\n'),
    ("torch.utils.data workers", "loader = torch.utils.data.DataLoader(list(range(8)), num_workers=2)\n"),
    ("typing.sys", "import typing\nmods = typing.sys.modules\n"),
    ("getattr(bytes.decode)", "import typing\nsys_ = getattr(typing, bytes([115, 121, 115]).decode())\n"),
    ("pkgutil.resolve_name", 'import pkgutil\nm = pkgutil.resolve_name("kiln.tools.integrity.runtime")\n'),
    ("pydoc.locate", 'import pydoc\nm = pydoc.locate("kiln.tools.integrity.runtime")\n'),
    ("ctypes PyRun_SimpleString", 'import ctypes\nctypes.pythonapi.PyRun_SimpleString(b"import sys")\n'),
    ("numpy compute", "import numpy as np\ny = np.maximum(torch.ones(3).numpy(), 0)\n"),
    ("global module hook", "torch.nn.modules.module.register_module_forward_pre_hook(lambda m, a: None)\n"),
    ("torch.library override", 'lib = torch.library.Library("aten", "IMPL")\nlib.impl("relu", lambda x: x, "CUDA")\n'),
    ("triton launch hook", "@triton.jit\ndef k(x):\n    pass\n\n\nk.add_pre_run_hook(lambda *a, **kw: None)\n"),
    ("sys.modules write via torch", 'torch.sys.modules["kiln.tools.integrity.runtime"] = None\n'),
    ("C++ open/write", CPP.format(body='#include <fcntl.h>\n#include <unistd.h>\nvoid pwn() {\n'
                                       '  int fd = open("/root/.bashrc", O_WRONLY | O_APPEND);\n  write(fd, "x", 1);\n}')),
    ("C++ socket/connect", CPP.format(body="#include <sys/socket.h>\n#include <netinet/in.h>\nvoid pwn() {\n"
                                           "  int s = socket(AF_INET, SOCK_STREAM, 0);\n  sockaddr_in a{};\n"
                                           "  connect(s, (sockaddr*)&a, sizeof a);\n}")),
    ("C++ kill parent", CPP.format(body="#include <signal.h>\n#include <unistd.h>\nvoid pwn() { kill(getppid(), 9); }")),
    ("C++ raw syscall", CPP.format(body="#include <sys/syscall.h>\n#include <unistd.h>\n"
                                        "void pwn() { syscall(SYS_unlink, \"/root/.bashrc\"); }")),
    ("C++ Python C API by token pasting", CPP.format(body="#include <torch/extension.h>\n#define JOIN(a, b) a##b\n"
                                                          "void pwn() { JOIN(P, yRun_SimpleString)(\"import sys\"); }")),
    # issue 22: objects the file holds, keys built from pieces, a forged self, native names under other spellings
    ("triton kernel's capture scope", "@triton.jit\ndef k(x):\n    pass\n\n\ng = k.get_capture_scope()\n"),
    ("triton kernel handed on", "@triton.jit\ndef k(x):\n    pass\n\n\ndef grab(f):\n    return f.cache\n\n\ngrab(k)\n"),
    ("library JIT function's source", "def g(f):\n    f.src = 'def sum(x): pass'\n\n\ng(tl.sum)\n"),
    ("subscript key from pieces", "def f(scope):\n    return scope['__bu' + 'iltins__']['ex' + 'ec']\n"),
    ("subscript key from chr", "def f(scope):\n    return scope[chr(95) * 2 + 'import' + chr(95) * 2]\n"),
    ("format template from pieces", "def f(x):\n    return ('{0.__glo' + 'bals__}').format(x)\n"),
    ("match class pattern", "def f(fn):\n    match fn:\n        case object(__globals__=g):\n            return g\n"),
    ("forged self", "class R:\n    def get_capture_scope(self):\n        return {}\n\n    def scope(self):\n"
                    "        return self.get_capture_scope()\n\n\ng = R.scope(tl.sum)\n"),
    ("generator code object", "def f():\n    g = (i for i in range(2))\n    return g.gi_code.co_consts\n"),
    ("triton pre_hook", "c = triton.Config({'BLOCK': 128}, pre_hook=print)\n"),
    ("C++ asm label", CPP.format(body='#include <torch/extension.h>\nextern "C" int run(const char*) '
                                      '__asm__("PyRun_SimpleString");\nvoid pwn() { run("import sys"); }')),
    ("C++ using namespace pybind11", CPP.format(body="#include <torch/extension.h>\nusing namespace pybind11;\n"
                                                     "void pwn() { module_::import(\"sys\"); }")),
    ("C++ namespace alias", CPP.format(body="#include <torch/extension.h>\nnamespace q = pybind11;\n"
                                            "void pwn() { q::module_::import(\"sys\"); }")),
    ("C++ symlink swap", CPP.format(body='#include <torch/extension.h>\nvoid pwn() { symlink("/etc/passwd", "out.pt"); }')),
    ("C++ renameat2", CPP.format(body='#include <torch/extension.h>\nextern "C" int renameat2(int, const char*, int, '
                                      'const char*, unsigned);\nvoid pwn() { renameat2(-100, "a", -100, "b", 2); }')),
    ("C++ environ", CPP.format(body='#include <torch/extension.h>\nextern char** environ;\n'
                                    'const char* pwn() { return environ[0]; }')),
]
NOT_YET: frozenset[str] = frozenset()
"""Routes the allowlist still lets through (none now: C++ OS calls and `##` pasting, and Python hook
methods, are refused; the sandbox stops the C++ calls' side effects at run time as well)."""
WHY = "the allowlist does not refuse this route yet"


def _params() -> list:
    return [pytest.param(src, id=name, marks=pytest.mark.xfail(strict=True, reason=WHY) if name in NOT_YET else ())
            for name, src in ROUTES]


@pytest.mark.parametrize("source", _params())
def test_allowed_imports_cannot_reach_forbidden_things(source):
    findings = scan_candidate(HEAD + source, filename="candidate.py", dtype="fp32")
    rejects = [f.rule for f in findings if f.severity == "reject" and f.rule.startswith("static.")]
    assert rejects, [(f.rule, f.severity, f.evidence) for f in findings]
