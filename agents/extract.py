"""Pull the one candidate module out of a Coder reply (fenced code, never code inside JSON).

A reply must hold exactly one usable Python block. Blocks in other languages (a ```cuda or ```bash
snippet in the explanation) are not candidates. Several Python blocks are accepted only when
exactly one of them defines `class ModelNew`; otherwise the reply is ambiguous and rejected.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from kiln.tools.records import JSON_SAFE

FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([^\n`]*)$", re.MULTILINE)
PYTHON_TAGS = frozenset({"", "python", "py", "python3", "triton"})
MODEL_NEW = re.compile(r"^class\s+ModelNew\b", re.MULTILINE)


class Block(BaseModel):
    model_config = JSON_SAFE

    info: str
    code: str


class Extraction(BaseModel):
    model_config = JSON_SAFE

    ok: bool
    code: str | None = None
    error: str | None = None
    notes: str = ""


def fenced_blocks(text: str) -> tuple[list[Block], bool]:
    """All fenced blocks in order, and whether the last fence was left open (a truncated reply)."""
    blocks: list[Block] = []
    opened = None
    for m in FENCE.finditer(text):
        if opened is None:
            opened = m
        elif m.group(1)[0] == opened.group(1)[0] and len(m.group(1)) >= len(opened.group(1)) and not m.group(2).strip():
            body = text[opened.end() + 1 : m.start()]
            blocks.append(Block(info=opened.group(2).strip().lower(), code=body.rstrip() + "\n"))
            opened = None
    return blocks, opened is not None


def _tag(block: Block) -> str:
    words = block.info.split()
    return words[0] if words else ""


def _notes(text: str) -> str:
    """The prose around the code, trimmed (kept with the reply for the run directory): everything
    outside fences, a fence closed by the next run of its character at least as long (or the end).
    One pass over the fence runs: a regex with a back-reference took 11 s on a reply holding one run
    of 200,000 backticks (a red-team completion), before any check and under no timeout."""
    kept: list[str] = []
    pos, opener = 0, None
    for run in re.finditer(r"`{3,}|~{3,}", text):
        if opener is None:
            kept.append(text[pos:run.start()])
            opener = run.group(0)
        elif run.group(0)[0] == opener[0] and len(run.group(0)) >= len(opener):
            opener, pos = None, run.end()
    if opener is None:
        kept.append(text[pos:])
    return " ".join(" ".join(kept).split())[:600]


def extract_code(text: str) -> Extraction:
    blocks, truncated = fenced_blocks(text)
    notes = _notes(text)
    python = [b for b in blocks if _tag(b) in PYTHON_TAGS]
    if not python:
        if truncated:
            return Extraction(ok=False, error="the reply's code block is never closed (reply truncated?)", notes=notes)
        others = sorted({b.info for b in blocks})
        seen = f" (only {', '.join(others)} blocks)" if others else ""
        return Extraction(ok=False, error=f"no fenced python code block in the reply{seen}", notes=notes)
    if len(python) > 1:
        defining = [b for b in python if MODEL_NEW.search(b.code)]
        if len(defining) != 1:
            return Extraction(
                ok=False,
                error=f"ambiguous reply: {len(python)} python code blocks, {len(defining)} define class ModelNew; "
                "expected exactly one block",
                notes=notes,
            )
        python = defining
    code = python[0].code
    if not MODEL_NEW.search(code):
        return Extraction(ok=False, error="the code block does not define class ModelNew", notes=notes)
    return Extraction(ok=True, code=code, notes=notes)
