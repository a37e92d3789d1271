"""Host-code rules of the C++ allowlist (issue 22, part 5): what the host side of a kernel extension
may name, beyond `csource`'s token rules.

- `static.cpp-asm`: `asm` / `__asm__` / `__asm` in host code (an asm label binds any symbol under
  another name: `int f() __asm__("PyRun_SimpleString")`; an asm statement makes raw system calls),
  the attributes and pragmas that do the same (`alias`, `weakref`, `ifunc`, `symver`, `#pragma weak`,
  `#pragma redefine_extname`, `_Pragma(...)`), load-time hooks (`constructor`, `destructor`,
  `section`), and `#define` / `#undef` of reserved names (`#define __device__` turns a "device"
  body into host code). Inline PTX in `__global__` / `__device__` bodies stays allowed; every asm
  string is still read for Python C API and C library names.
- `static.introspection`: pybind11 reached under another name (`using namespace pybind11`, `using
  namespace py`, `namespace q = pybind11;`, a `#define` of it), a `PYBIND11_MODULE` body that does
  more than `m.def(...)` (`m` is a module object: `m.import`, `decltype(m)::import`), other
  pybind11 entry macros, torch's Python bridge (`THPVariable_*`, `torch::python`, `torch::jit`,
  `pyobj`), and Python C API names inside any string.
- `static.env-or-file`: every name the machine's C library exports that `native_policy` does not
  allow, called or not (`symlink`, `renameat2`, `mkfifoat`, `posix_fallocate`, `&splice`,
  `environ`), unless the source defines a function of that name itself; `std::` files, threads and
  processes (`std::filesystem`, `std::ofstream`, `std::system`, and bare `thread`, `ifstream`, ...
  under `using namespace std`); headers for files, processes, signals, sockets and dynamic loading.
"""

from __future__ import annotations

import re

from kiln.tools.integrity import native_policy as N
from kiln.tools.integrity.csource_lex import CHit, Tok, host_indices, tokenize

_ASM = frozenset({"asm", "__asm__", "__asm"})
_ATTR_DENIED = frozenset({"alias", "weakref", "weak", "ifunc", "symver", "constructor", "destructor", "section",
                          "init_priority", "visibility", "used", "retain", "externally_visible"})
_PRAGMA_DENIED = frozenset({"weak", "redefine_extname", "comment", "push_macro", "pop_macro"})
_STD_BARE = frozenset({"thread", "jthread", "async", "this_thread", "packaged_task", "ifstream", "ofstream",
                       "fstream", "filebuf", "filesystem", "launch"})
_BRIDGE = re.compile(r"^(?:THP\w*|\w*PyInterpreter\w*|pyobj\w*)$")
_BRIDGE_NS = ("torch::python", "torch::jit", "torch::utils", "torch::autograd::python", "c10::impl::PyInterpreter")
_PY_IN_STRING = re.compile(r"\b_?Py(?:[A-Z][A-Za-z0-9]*)?_[A-Za-z]\w*")
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*["<]([^">\n]*)[">]', re.M)
_HEADERS_DENIED = re.compile(r"""^(?:
    thread | future | fstream | filesystem | experimental/filesystem | csignal | signal\.h | spawn\.h | dlfcn\.h
  | unistd\.h | fcntl\.h | dirent\.h | ftw\.h | fts\.h | pty\.h | termios\.h | netdb\.h | link\.h | Python\.h
  | sys/.* | netinet/.* | arpa/.* | linux/.* | asm/.* | bits/syscall\.h | syscall\.h
)$""", re.X)


def host_hits(src: str) -> list[CHit]:
    """Every host-code allowlist hit in one C/C++/CUDA source."""
    toks = tokenize(_blank_includes(src), strings=True)
    host = host_indices(toks)
    hits = _asm_hits(toks, host) + _attribute_hits(toks) + _preprocessor_hits(toks) + _pybind_hits(toks)
    hits += _module_body_hits(toks) + _string_hits(toks) + _header_hits(src)
    hits += _library_hits(toks, host, std_open=_using_std(toks))
    return hits


def _blank_includes(src: str) -> str:
    """The source with `#include` lines emptied (their path tokens are no calls), lines kept."""
    return _INCLUDE.sub("", src)


def _asm_hits(toks: list[Tok], host: set[int]) -> list[CHit]:
    out = []
    for i, t in enumerate(toks):
        if t.text not in _ASM:
            continue
        if i in host:
            out.append(CHit("static.cpp-asm", f"{t.text} in host code", t.line))
        for s in _call_strings(toks, i):  # PTX words (exit, sync) are libc names too: those only in host asm
            names = set(re.findall(r"[A-Za-z_]\w*", s.text))
            bad = sorted(n for n in names if _PY_IN_STRING.fullmatch(n) or (i in host and _libc_denied(n)))
            out += [CHit("static.cpp-asm", f"asm naming {n}", s.line) for n in bad]
    return out


def _call_strings(toks: list[Tok], i: int) -> list[Tok]:
    """String literals inside the parentheses after token i (`asm volatile ("...")`)."""
    j = i + 1
    while j < len(toks) and toks[j].kind == "ident":  # volatile, goto, inline
        j += 1
    if j >= len(toks) or toks[j].text != "(":
        return []
    depth, out = 0, []
    for t in toks[j:]:
        depth += {"(": 1, ")": -1}.get(t.text, 0)
        if t.kind == "string":
            out.append(t)
        if depth == 0:
            break
    return out


def _attribute_hits(toks: list[Tok]) -> list[CHit]:
    """`__attribute__((alias("...")))`, `[[gnu::weakref("...")]]` and the like."""
    out, depth = [], -1  # depth >= 0: inside the parentheses of an attribute
    for t in toks:
        if t.text in ("__attribute__", "__declspec"):
            depth = 0
            continue
        if depth >= 0 and t.text in ("(", ")"):
            depth += 1 if t.text == "(" else -1
            depth = -1 if depth == 0 and t.text == ")" else depth
        name = t.text.split("::")[-1].strip("_")
        scoped = t.text.startswith(("gnu::", "__gnu__::", "clang::"))
        if t.kind == "ident" and (depth > 0 or scoped) and name in _ATTR_DENIED:
            out.append(CHit("static.cpp-asm", f"the attribute {name} (binds or runs a symbol the scan can't see)",
                            t.line))
    return out


def _preprocessor_hits(toks: list[Tok]) -> list[CHit]:
    out = []
    for i, t in enumerate(toks):
        prev = toks[i - 1].text if i else ""
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if prev == "#" and t.text == "pragma" and nxt and nxt.text in _PRAGMA_DENIED:
            out.append(CHit("static.cpp-asm", f"#pragma {nxt.text}", t.line))
        elif t.text in ("_Pragma", "__pragma"):
            out.append(CHit("static.cpp-asm", f"{t.text}(...) (a pragma the scan would have to read from a string)",
                            t.line))
        elif prev == "#" and t.text in ("define", "undef") and nxt and _reserved(nxt.text):
            out.append(CHit("static.cpp-asm", f"#{t.text} {nxt.text} (redefines a reserved name)", t.line))
    return out


_SCANNED_KEYWORDS = frozenset({"__global__", "__device__", "__host__", "__shared__", "__constant__", "__managed__",
                               "__launch_bounds__", "__attribute__", "__declspec", "_Pragma", "__pragma", "extern",
                               "static", "inline", "__forceinline__", "__noinline__"})


def _reserved(name: str) -> bool:
    """Names the scan reads to tell host from device code, asm, attributes, pybind11's macros."""
    return name in _SCANNED_KEYWORDS or name in _ASM or name.startswith("PYBIND11")


def _pybind_hits(toks: list[Tok]) -> list[CHit]:
    out = []
    for i, t in enumerate(toks):
        text = t.text.lstrip(":")
        first = text.split("::")[0]
        prev = [x.text for x in toks[max(0, i - 3):i]]
        if first in ("pybind11", "py") and prev[-2:] == ["using", "namespace"]:
            out.append(CHit("static.introspection", f"using namespace {text}", t.line))
        elif first in ("pybind11", "py") and len(prev) == 3 and prev[0] == "namespace" and prev[2] == "=" and not (
                prev[1] == "py" and text == "pybind11"):
            out.append(CHit("static.introspection", f"namespace {prev[1]} = {text}", t.line))
        elif text == "pybind11" and not (len(prev) == 3 and prev == ["namespace", "py", "="]):
            out.append(CHit("static.introspection", "pybind11 named on its own (a macro or alias for it)", t.line))
        elif text == "py" and _in_define(toks, i):
            out.append(CHit("static.introspection", "a #define of py", t.line))
        elif t.kind == "ident" and (_BRIDGE.match(text.split("::")[-1]) or text.startswith(_BRIDGE_NS)):
            out.append(CHit("static.introspection", f"{text} (torch's bridge to Python objects)", t.line))
        elif text.startswith("PYBIND11_") and text != "PYBIND11_MODULE":
            out.append(CHit("static.introspection", text, t.line))
    return out


def _in_define(toks: list[Tok], i: int) -> bool:
    line = toks[i].line
    same = [t.text for t in toks if t.line == line]
    return len(same) >= 3 and same[0] == "#" and same[1] == "define"


def _module_body_hits(toks: list[Tok]) -> list[CHit]:
    """A PYBIND11_MODULE body may only `m.def(...)` (and set `m.doc()`)."""
    out = []
    for i, t in enumerate(toks):
        if t.text != "PYBIND11_MODULE":
            continue
        close = _match(toks, i + 1, "(", ")")
        mod = toks[close - 1].text if close else ""
        if close is None or close + 1 >= len(toks) or toks[close + 1].text != "{":
            continue
        end = _match(toks, close + 1, "{", "}") or len(toks)
        for stmt in _statements(toks[close + 2:end]):
            head = [x.text for x in stmt[:3]]
            if head[:3] not in ([mod, ".", "def"], [mod, ".", "doc"]):
                out.append(CHit("static.introspection", "PYBIND11_MODULE does more than "
                                f"{mod}.def(...): {' '.join(head)} ...", stmt[0].line))
    return out


def _match(toks: list[Tok], j: int, open_: str, close: str) -> int | None:
    if j >= len(toks) or toks[j].text != open_:
        return None
    depth = 0
    for k in range(j, len(toks)):
        depth += 1 if toks[k].text == open_ else -1 if toks[k].text == close else 0
        if depth == 0:
            return k
    return None


def _statements(body: list[Tok]) -> list[list[Tok]]:
    out: list[list[Tok]] = []
    cur: list[Tok] = []
    depth = 0
    for t in body:
        depth += 1 if t.text in "({[" and t.kind == "punct" else -1 if t.text in ")}]" and t.kind == "punct" else 0
        if t.text == ";" and depth == 0:
            out += [cur] if cur else []
            cur = []
        else:
            cur.append(t)
    return out + ([cur] if cur else [])


def _string_hits(toks: list[Tok]) -> list[CHit]:
    return [CHit("static.introspection", f"{m.group(0)} named in a string", t.line)
            for t in toks if t.kind == "string" for m in _PY_IN_STRING.finditer(t.text)]


def _header_hits(src: str) -> list[CHit]:
    return [CHit("static.env-or-file", f"#include <{m.group(1).strip()}> (files, processes, signals, sockets or "
                 "dynamic loading)", src.count("\n", 0, m.start()) + 1)
            for m in _INCLUDE.finditer(src) if _HEADERS_DENIED.match(m.group(1).strip())]


def _libc_denied(name: str) -> bool:
    return name in N.libc_exports() and name not in N.LIBC_ALLOWED and not N.is_math(name)


def _library_hits(toks: list[Tok], host: set[int], *, std_open: bool) -> list[CHit]:
    out = []
    for i, t in enumerate(toks):
        if t.kind != "ident" or i not in host or (i and toks[i - 1].text in (".", "->")):
            continue
        text = t.text.lstrip(":")
        parts = text.split("::")
        if parts[0] == "std" and len(parts) > 1 and parts[1] in N.STD_DENIED:
            out.append(CHit("static.env-or-file", f"{text} (C++ files, threads or processes)", t.line))
        elif std_open and len(parts) >= 1 and parts[0] in _STD_BARE:
            out.append(CHit("static.env-or-file", f"{text} under using namespace std", t.line))
        elif N.CUDA_DENIED.match(parts[-1]):
            out.append(CHit("static.env-or-file", f"{text} (a CUDA entry point no kernel needs: it loads device code "
                            "the scan never read, shares memory across processes or changes device-wide state)",
                            t.line))
        elif len(parts) == 1 and _libc_denied(text):  # a function of the same name is refused too
            out.append(CHit("static.env-or-file", f"{text} (a C library function no kernel needs)", t.line))
    return out


def _using_std(toks: list[Tok]) -> bool:
    return any(toks[i].text == "using" and toks[i + 1].text == "namespace" and toks[i + 2].text.lstrip(":") == "std"
               for i in range(len(toks) - 2))
