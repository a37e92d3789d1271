"""The integrity rules for kernel source strings, on csource_lex's tokens.

Comments, string and character literals are dropped (so a commented-out `cudaStreamCreate` is not
a finding and a `"cudaStreamCreate"` string is not a call), line continuations are joined,
`a ## b` token pastes are joined, and `ns::name` chains become one qualified token. Rules look at
tokens, never at raw text, so spacing and comments can't hide a call.
"""

from __future__ import annotations

import re

from kiln.tools.integrity.csource_host import host_hits
from kiln.tools.integrity.csource_lex import TOKEN, CHit, Tok, device_regions, tokenize
from kiln.tools.integrity.ops import is_compute

STREAM = frozenset({
    "cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority", "cuStreamCreate",
    "cuStreamCreateWithPriority", "cudaStreamNonBlocking", "CU_STREAM_NON_BLOCKING", "cudaStreamPerThread",
    "CU_STREAM_PER_THREAD", "getStreamFromPool", "getStreamFromExternal", "setCurrentCUDAStream",
    "CUDAStreamGuard", "OptionalCUDAStreamGuard", "CUDAMultiStreamGuard", "cudaLaunchHostFunc",
    "cuLaunchHostFunc", "cudaStreamAddCallback", "cudaStreamBeginCapture", "cudaGraphLaunch",
})
THREADS = frozenset({"std::thread", "std::jthread", "std::async", "pthread_create", "fork", "vfork",
                     "CreateThread", "std::launch::async"})
ENV_FILE = frozenset({"getenv", "std::getenv", "secure_getenv", "fopen", "freopen", "std::ifstream",
                      "std::ofstream", "std::fstream", "ifstream", "ofstream", "fstream", "mmap", "readlink",
                      "opendir", "popen", "system"})
INTROSPECTION = frozenset({"dlsym", "dlopen", "PyImport_ImportModule", "PyRun_SimpleString", "PyEval_GetFrame",
                           "PyImport_GetModuleDict", "PyImport_AddModule", "PyRun_String", "PySys_GetObject",
                           "py::module_::import", "pybind11::module_::import", "py::module::import",
                           "pybind11::module::import", "py::eval", "py::exec", "pybind11::eval", "pybind11::exec"})
DOWNCAST = frozenset({"__half", "__half2", "__nv_bfloat16", "__nv_bfloat162", "nv_bfloat16",
                      "__float2half", "__float2half_rn", "__float2bfloat16", "__float2bfloat16_rn",
                      "__floats2half2_rn", "__float22half2_rn", "__nv_fp8_e4m3", "__nv_fp8_e5m2"})
VENDOR_COMPUTE = re.compile(r"^(?:\w+::)*(?:cublas|cublasLt|cudnn|cusparse|cusparseLt|cufft|cusolver)[A-Z_]\w*$")
"""Host calls into vendor compute libraries: the work is cuBLAS's / cuDNN's, not the candidate's."""
PYTHON_C_API = re.compile(r"^_?Py(?:[A-Z]|_[A-Z])\w*$")
PYBIND_OK = frozenset({"py::arg", "pybind11::arg"})
"""The only pybind11 names a kernel needs (`m.def("f", &f, py::arg("x"))` in PYBIND11_MODULE)."""
DISPATCH_OVERRIDE = frozenset({"TORCH_LIBRARY_IMPL"})
_NOT_OPS = frozenset({"cuda", "native", "indexing", "nn", "functional", "autograd", "detail", "check",
                      "globalContext", "zeros", "empty", "getCurrentCUDAStream", "device", "dtype"})


def scan_source(src: str, *, allowlist: bool = False) -> list[CHit]:
    """Every rule hit in one C/C++/CUDA source, with its line inside the source. `allowlist` adds
    the allowlist's C++ rules: no Python C API, no pybind11 beyond `py::arg`, and `csource_host`'s
    host-code rules (asm, symbol aliases, C library calls by allowlist)."""
    toks = tokenize(src)
    hits: list[CHit] = token_pastes(src) + host_hits(src) if allowlist else []
    device = device_regions(toks)
    for i, t in enumerate(toks):
        if t.kind != "ident":
            continue
        called = i + 1 < len(toks) and toks[i + 1].text == "("
        hits += _ident_hits(t, called) + (_allowlist_hits(toks, i, called) if allowlist else [])
        if called and _is_torch_op(t.text):
            hits.append(CHit("static.cpp-torch-op", t.text, t.line))
        elif called and i in device.host_methods and (_is_method_op(toks, i) or VENDOR_COMPUTE.match(t.text)):
            hits.append(CHit("static.cpp-torch-op", ("" if VENDOR_COMPUTE.match(t.text) else ".") + t.text, t.line))
    return hits


def _allowlist_hits(toks: list[Tok], i: int, called: bool) -> list[CHit]:
    t = toks[i]
    last = t.text.split("::")[-1]
    if PYTHON_C_API.match(last) or (t.text.startswith(("py::", "pybind11::")) and t.text not in PYBIND_OK):
        return [CHit("static.introspection", t.text, t.line)]
    return []  # C library calls, asm, aliases of pybind11: csource_host.host_hits


def token_pastes(src: str) -> list[CHit]:
    """`##` outside comments and strings. The allowlist refuses it: a pasted name (`JOIN(P,
    yRun_SimpleString)` through a function-like macro) is assembled after any scan of the tokens
    could see it, and no kernel needs one."""
    src = src.replace("\\\r\n", "").replace("\\\n", "")
    out = []
    for m in TOKEN.finditer(src):
        if m.lastgroup == "punct" and m.group(0) == "##":
            out.append(CHit("static.cpp-token-paste", "##", src.count("\n", 0, m.start()) + 1))
    return out


_ATTRIBUTE_GROUPS = frozenset({"__launch_bounds__", "__attribute__", "__cluster_dims__", "__declspec", "alignas",
                               "__maxnreg__"})


def global_definitions(src: str) -> set[str]:
    """Names of the `__global__` functions a source *defines* (with a body), read from tokens, so
    a name in a comment, a string or a declaration does not count."""
    toks = tokenize(src)
    names: set[str] = set()
    for i, t in enumerate(toks):
        if t.text == "__global__":
            j = _parameter_list(toks, i + 1)
            if j is not None and _has_body(toks, j):
                names.add(toks[j - 1].text.split("::")[-1])
    return names


def _parameter_list(toks: list[Tok], j: int) -> int | None:
    """Index of the `(` that opens the parameter list of the declaration starting at `j`, skipping
    attribute groups such as `__launch_bounds__(256)`."""
    while j < len(toks) and toks[j].text not in (";", "{"):
        if toks[j].text == "(" and toks[j - 1].kind == "ident":
            if toks[j - 1].text not in _ATTRIBUTE_GROUPS:
                return j
            j = _close_paren(toks, j)
        j += 1
    return None


def _close_paren(toks: list[Tok], j: int) -> int:
    depth = 0
    for k in range(j, len(toks)):
        depth += {"(": 1, ")": -1}.get(toks[k].text, 0)
        if depth == 0:
            return k
    return len(toks)


def _has_body(toks: list[Tok], open_paren: int) -> bool:
    """After the parameter list that opens at `open_paren`, does a `{` come before any `;`?"""
    depth = 0
    for k in range(open_paren, len(toks)):
        if toks[k].text == "(":
            depth += 1
        elif toks[k].text == ")":
            depth -= 1
        elif depth == 0 and toks[k].text in ("{", ";"):
            return toks[k].text == "{"
    return False


_LAUNCHES = frozenset({"<<<", "cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchCooperativeKernel",
                       "cudaLaunchKernelEx", "cuLaunchKernelEx"})


def launches_kernel(src: str) -> bool:
    """Does this source launch a kernel (`<<<...>>>` or a launch API call)?"""
    return any(t.text in _LAUNCHES for t in tokenize(src))


def _ident_hits(t: Tok, called: bool) -> list[CHit]:
    last = t.text.split("::")[-1]
    out = []
    if t.text in STREAM or last in STREAM:
        out.append(CHit("static.stream", t.text, t.line))
    if t.text in THREADS or (called and last in ("pthread_create", "fork", "vfork")):
        out.append(CHit("static.threads", t.text, t.line))
    if (t.text in ENV_FILE or last in ("getenv", "secure_getenv")) and (called or "stream" in last):
        out.append(CHit("static.env-or-file", t.text, t.line))
    if t.text in INTROSPECTION or last in ("dlsym", "dlopen"):
        out.append(CHit("static.introspection", t.text, t.line))
    if t.text in DOWNCAST or last in DOWNCAST:
        out.append(CHit("static.downcast", t.text, t.line))
    if t.text in DISPATCH_OVERRIDE:
        out.append(CHit("static.monkey-patch", t.text, t.line))
    return out


def _is_torch_op(name: str) -> bool:
    parts = name.lstrip(":").split("::")
    if len(parts) < 2 or parts[0] not in ("torch", "at"):
        return False
    last = parts[-1]
    if last in _NOT_OPS or not last[:1].islower() or any(p in ("cuda", "detail", "indexing") for p in parts[1:-1]):
        return False
    return _aten_has(last) and is_compute(last)


def _is_method_op(toks: list[Tok], i: int) -> bool:
    prev = toks[i - 1].text if i else ""
    return prev in (".", "->") and "::" not in toks[i].text and _aten_has(toks[i].text) and is_compute(toks[i].text)


def _aten_has(name: str) -> bool:
    import torch

    try:
        return hasattr(torch.ops.aten, name)
    except Exception:  # noqa: BLE001 - an odd name is simply not an ATen op
        return False
