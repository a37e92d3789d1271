"""C/C++/CUDA source strings inside a candidate: find them, fold them, scan them.

Sources are the arguments of compile calls (`load_inline`, kiln's `CudaKernel`, cupy `RawKernel`,
...), folded through names, concatenations and f-strings, plus any string constant that looks like
C++/CUDA. A source argument that can't be folded to a constant is reported (`static.opaque-source`,
a warning): kiln can't read what it can't see.
"""

from __future__ import annotations

import ast
import re

from kiln.tools.integrity import static_rules as R
from kiln.tools.integrity.csource import VENDOR_COMPUTE, launches_kernel, scan_source
from kiln.tools.integrity.resolve import Scope
from kiln.tools.records import Finding, Severity

_SOURCE_KWARGS = frozenset({"cpp_sources", "cuda_sources", "source", "code", "src", "sources"})


def scan_sources(tree: ast.AST, scope: Scope, *, filename: str, dtype: str, own_triton: bool,
                 allowlist: bool = False) -> list[Finding]:
    consts, folded, findings = _collect(tree, scope, filename)
    # an own kernel that actually gets launched: Triton, a Python-launched CUDA kernel, or <<<>>> in C++
    own_kernel = own_triton or _python_launcher(tree, scope) or any(launches_kernel(t) for t, _ in consts + folded)
    seen: set[tuple[str, str]] = set()
    # literal pieces first (exact lines), then whole folded sources for what only shows once joined
    for text, line in consts + folded:
        for f, key in _scan_text(text, line, filename=filename, dtype=dtype, own_kernel=own_kernel, allowlist=allowlist):
            if key not in seen:
                seen.add(key)
                findings.append(f)
    return findings


def _collect(tree: ast.AST, scope: Scope, filename: str) -> tuple[list, list, list[Finding]]:
    texts: dict[str, int] = {}
    consts: dict[str, int] = {}
    findings: list[Finding] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _is_sink(node, scope):
            for arg, is_source in _sink_args(node):
                s = scope.fold(arg)
                if s is not None:
                    texts.setdefault(s, getattr(arg, "lineno", 0))
                elif is_source and not _obviously_not_string(arg):
                    findings.append(Finding(rule="static.opaque-source", severity="warn", line=getattr(arg, "lineno", None),
                                            file=filename, evidence="a kernel source built at run time can't be scanned"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _looks_like_c(node.value):
            consts.setdefault(node.value, node.lineno)
    return list(consts.items()), list(texts.items()), findings


def _is_sink(node: ast.Call, scope: Scope) -> bool:
    return bool(_call_names(node, scope) & R.SOURCE_SINKS)


def _call_names(node: ast.Call, scope: Scope) -> set[str]:
    names = {q.rsplit(".", 1)[-1] for q in scope.resolve(node.func)}
    if isinstance(node.func, ast.Name):
        names.add(node.func.id)
    elif isinstance(node.func, ast.Attribute):
        names.add(node.func.attr)
    return names


def _python_launcher(tree: ast.AST, scope: Scope) -> bool:
    return any(isinstance(n, ast.Call) and _call_names(n, scope) & R.PYTHON_LAUNCHERS for n in ast.walk(tree))


def _sink_args(node: ast.Call) -> list[tuple[ast.AST, bool]]:
    out: list[tuple[ast.AST, bool]] = []
    pairs = [(a, i == 0) for i, a in enumerate(node.args)]
    pairs += [(k.value, k.arg in _SOURCE_KWARGS) for k in node.keywords]
    for arg, is_source in pairs:
        elts = arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg]
        out += [(e, is_source) for e in elts]
    return out


def _obviously_not_string(arg: ast.AST) -> bool:
    return isinstance(arg, ast.Constant) and not isinstance(arg.value, str)


def _looks_like_c(s: str) -> bool:
    return any(h in s for h in R.SINK_TEXT_HINTS)


def _scan_text(text: str, line: int, *, filename: str, dtype: str, own_kernel: bool,
               allowlist: bool = False) -> list[tuple[Finding, tuple]]:
    out: list[tuple[Finding, tuple]] = []
    if "default-stream" in text:
        out.append((_f("static.stream", "reject", "compiles with a per-thread default stream", line, filename),
                    ("static.stream", "default-stream")))
    if "use_fast_math" in text and dtype == "fp32":
        out.append((_f("static.downcast", "warn", "compiles with fast-math approximations", line, filename),
                    ("static.downcast", "use_fast_math")))
    if allowlist:
        out += _include_findings(text, line, filename)
    for h in scan_source(text, allowlist=allowlist):
        if h.rule == "static.downcast" and dtype != "fp32":
            continue
        sev: Severity = "warn" if h.rule == "static.downcast" else "reject"
        ev = f"{h.token} in C++/CUDA source (source line {h.line})"
        if h.rule == "static.cpp-torch-op":
            sev = "warn" if own_kernel else "reject"
            what = "the library function" if VENDOR_COMPUTE.match(h.token) else "the PyTorch op"
            ev = f"host code calls {what} {h.token} (source line {h.line})" + (
                "" if own_kernel else "; the candidate has no kernel of its own")
        out.append((_f(h.rule, sev, ev, line + h.line - 1, filename), (h.rule, h.token)))
    return out


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*["<]([^">\n]*)[">]', re.M)


def _include_findings(text: str, line: int, filename: str) -> list[tuple[Finding, tuple]]:
    """`#include` of an absolute path or one that climbs out (`..`): the compiler reads any file
    it is pointed at, and its error messages quote it back to the Coder."""
    out = []
    for m in _INCLUDE.finditer(text):
        path = m.group(1).strip()
        if path.startswith(("/", "~")) or ".." in path.split("/"):
            at = line + text.count("\n", 0, m.start())
            out.append((_f("static.env-or-file", "reject", f"#include of a file outside the compiler's include "
                           f"paths: {path!r}", at, filename), ("static.env-or-file", path)))
    return out


def _f(rule: str, sev: Severity, evidence: str, line: int, filename: str) -> Finding:
    return Finding(rule=rule, severity=sev, evidence=evidence, line=line, file=filename)
