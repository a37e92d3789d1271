"""Trim compiler output to the first few errors, each as `file:line: error: message`, for a Coder.

Pure functions over text: they understand nvcc/NVRTC (EDG front end: `file(12): error: ...`), gcc and
clang (`file:12:5: error: ...`), ptxas, the linker, Python import failures and Triton's
`CompilationError` ("at 5:8:" relative to the jitted function, followed by the source and a caret).
"""

from __future__ import annotations

import re
from pathlib import PurePath

MAX_ERRORS = 5
MAX_LOG_CHARS = 4000

_EDG = re.compile(r"^(?P<file>[^\s()][^()]*?)\((?P<line>\d+)\): (?P<kind>(?:catastrophic )?error|fatal error)\s*:?\s*(?P<msg>.*)$")
_GCC = re.compile(r"^(?P<file>[^\s:][^:]*?):(?P<line>\d+):(?:\d+:)? (?P<kind>fatal error|error): (?P<msg>.*)$")
_OTHER = re.compile(
    r"(ptxas (?:fatal|error)\s*:.*|undefined (?:reference|symbol)[^\n]*|nvcc fatal\s*:.*|"
    r"NVRTC_ERROR\w*.*|ninja: build stopped.*)"
)
_TRITON_AT = re.compile(r"^at (?P<line>\d+):(?P<col>\d+):\s*$")


def short_file(path: str) -> str:
    """Build dirs are long temp paths; a Coder needs the file name it wrote (`cuda.cu`, `main.cpp`)."""
    return PurePath(path.strip()).name or path


def _context(lines: list[str], i: int) -> str:
    """The source line and caret an EDG/gcc error prints after itself, if present."""
    extra = []
    for nxt in lines[i + 1 : i + 3]:
        if nxt.strip() and (nxt.startswith(" ") or nxt.strip() == "^"):
            extra.append(nxt.rstrip())
        else:
            break
    return ("\n" + "\n".join(extra)) if extra else ""


def trim_errors(log: str, *, max_errors: int = MAX_ERRORS) -> list[str]:
    """First `max_errors` distinct errors in a compiler log, normalized to `file:line: error: msg`."""
    lines = log.splitlines()
    out: list[str] = []
    seen: set[str] = set()
    for i, line in enumerate(lines):
        entry = _match_line(line.rstrip())
        if entry is None or entry in seen:
            continue
        seen.add(entry)
        if _EDG.match(line.rstrip()) or _GCC.match(line.rstrip()):
            entry += _context(lines, i)
        out.append(entry)
        if len(out) >= max_errors:
            break
    return out


def _match_line(line: str) -> str | None:
    for pat in (_EDG, _GCC):
        m = pat.match(line)
        if m:
            return f"{short_file(m['file'])}:{m['line']}: {m['kind']}: {m['msg'].strip()}"
    m = _OTHER.search(line)
    return m.group(1).strip() if m else None


def log_tail(log: str, limit: int = MAX_LOG_CHARS) -> str:
    """The end of a log, where the compiler's summary is; capped so records stay small."""
    return log if len(log) <= limit else "...\n" + log[-limit:]


def triton_error(message: str, source: str | None, filename: str) -> str:
    """Turn Triton's "at L:C:" message into `file:line: error: msg` using the caret's source line.

    Triton numbers lines from the jitted function's `def`; the candidate file is searched for the
    exact source line above the caret to give the file's own line number.
    """
    lines = message.splitlines()
    caret = next((i for i, ln in enumerate(lines) if ln.strip() == "^"), None)
    msg = lines[-1].strip() if lines else message
    rel = _TRITON_AT.match(lines[0]) if lines else None
    where = f"{filename}:?"
    if caret is not None and caret > 0:
        code = lines[caret - 1]
        lineno = _find_line(source, code)
        if lineno is not None:
            where = f"{filename}:{lineno}"
        elif rel:
            where = f"{filename}:(kernel line {rel['line']})"
        return f"{where}: error: {msg}\n{code.rstrip()}\n{lines[caret].rstrip()}"
    return f"{where}: error: {msg}"


def _find_line(source: str | None, code: str) -> int | None:
    if not source or not code.strip():
        return None
    hits = [n for n, ln in enumerate(source.splitlines(), 1) if ln.rstrip() == code.rstrip()]
    return hits[0] if len(hits) == 1 else None


def python_error(exc: BaseException, filename: str) -> str:
    """`file:line: ExcType: msg` for an exception raised while importing or calling candidate code."""
    if isinstance(exc, SyntaxError):
        return f"{short_file(exc.filename or filename)}:{exc.lineno}: SyntaxError: {exc.msg}"
    tb = exc.__traceback__
    line = None
    while tb is not None:
        if PurePath(tb.tb_frame.f_code.co_filename).name == PurePath(filename).name:
            line = tb.tb_lineno
        tb = tb.tb_next
    where = f"{PurePath(filename).name}:{line}" if line else PurePath(filename).name
    text = str(exc).strip().splitlines()
    return f"{where}: {type(exc).__name__}: {text[0] if text else ''}".rstrip()


def _context_code(entry: str) -> str | None:
    """The offending source line an EDG (nvcc/NVRTC) or gcc error printed under itself."""
    lines = entry.splitlines()
    if len(lines) < 2:
        return None
    code = lines[1]
    if "|" in code and code.split("|", 1)[0].strip().isdigit():  # gcc: "   12 |     foo(x);"
        return code.split("|", 1)[1][1:]
    return code[2:] if code.startswith("  ") else code  # EDG indents the line by two spaces


def locate_in_source(errors: list[str], source: str | None, filename: str) -> list[str]:
    """Add the candidate file's own line to each error whose source line appears there exactly once
    ("cuda.cu:15: error: ..." -> "cuda.cu:15 (cand.py:42): error: ..."): the Coder edits the .py."""
    if not source:
        return errors
    out = []
    for entry in errors:
        code = _context_code(entry)
        lineno = _find_line(source, code) if code else None
        if lineno is None and code and code.strip():
            stripped = [n for n, ln in enumerate(source.splitlines(), 1) if ln.strip() == code.strip()]
            lineno = stripped[0] if len(stripped) == 1 else None
        if lineno is not None:
            head, sep, rest = entry.partition(": ")
            entry = f"{head} ({PurePath(filename).name}:{lineno}){sep}{rest}"
        out.append(entry)
    return out
