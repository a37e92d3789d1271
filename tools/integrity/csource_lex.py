"""A small C/C++/CUDA tokenizer, the rule-hit record, and which tokens are host code: what
csource.py's rules and csource_host.py's host-code rules both read."""

from __future__ import annotations

import re
from dataclasses import dataclass

TOKEN = re.compile(r"""
    (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>R"(?P<delim>[^(\s]{0,16})\(.*?\)(?P=delim)"|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<ident>(?:::\s*)?[A-Za-z_]\w*(?:\s*::\s*~?[A-Za-z_]\w*)*)
  | (?P<number>\.?\d[\w.]*)
  | (?P<punct><<<|>>>|\#\#|->|::|[^\s\w])
""", re.S | re.X)


@dataclass(frozen=True)
class Tok:
    kind: str  # ident | number | punct | string
    text: str
    line: int


def tokenize(src: str, *, strings: bool = False) -> list[Tok]:
    """Tokens of one source; `strings` keeps string and character literals (kind "string", the raw
    literal as text) for the rules that read them (asm labels, `_Pragma`)."""
    src = src.replace("\\\r\n", "").replace("\\\n", "")
    toks: list[Tok] = []
    for m in TOKEN.finditer(src):
        kind = m.lastgroup if m.lastgroup != "delim" else "string"
        if kind == "comment" or (kind == "string" and not strings):
            continue
        if kind == "string":
            toks.append(Tok("string", m.group("string"), src.count("\n", 0, m.start()) + 1))
            continue
        line = src.count("\n", 0, m.start()) + 1
        toks.append(Tok(kind or "punct", re.sub(r"\s+", "", m.group(0)), line))
    return _paste(toks)


def _paste(toks: list[Tok]) -> list[Tok]:
    """`a ## b` -> `ab`, as the preprocessor would paste them."""
    out: list[Tok] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        while i + 2 < len(toks) and toks[i + 1].text == "##" and toks[i + 2].kind == "ident":
            t = Tok("ident", t.text + toks[i + 2].text, t.line)
            i += 2
        out.append(t)
        i += 1
    return out


@dataclass(frozen=True)
class CHit:
    rule: str
    token: str
    line: int


@dataclass
class Regions:
    host_methods: set[int]


def device_regions(toks: list[Tok]) -> Regions:
    """Token indices outside `__global__` / `__device__` function bodies (host code). A
    `__host__ __device__` function runs on the host too: its body counts as host code."""
    host: set[int] = set()
    depth, device_depth, pending, also_host = 0, -1, False, False
    for i, t in enumerate(toks):
        if t.text in ("__global__", "__device__") and device_depth < 0:
            pending = True
        elif t.text == "__host__" and device_depth < 0:
            also_host = True
        elif t.text == "{":
            if pending and not also_host and device_depth < 0:
                device_depth, pending = depth, False
            pending = pending and not also_host
            also_host = False
            depth += 1
        elif t.text == "}":
            depth -= 1
            if depth == device_depth:
                device_depth = -1
        elif t.text == ";" and device_depth < 0:
            pending = also_host = False  # a declaration, not a definition
        if device_depth < 0:
            host.add(i)
    return Regions(host)


def host_indices(toks: list[Tok]) -> set[int]:
    """Indices of the tokens in host code (see `device_regions`)."""
    return device_regions(toks).host_methods
