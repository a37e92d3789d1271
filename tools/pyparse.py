"""`ast.parse` that is safe to call from several threads at once.

CPython 3.11 (and early 3.12) keeps the AST constructor's recursion counter in per-interpreter
state. When one thread's `ast.parse` lets go of the GIL while it builds the tree (a garbage
collection in the middle of it runs a finaliser, say) and another thread parses meanwhile, the
first one fails with "SystemError: AST constructor recursion depth mismatch" on perfectly good
source. kiln parses from many threads (a batch's jobs, the Proposer's cases validated side by
side, LangGraph's node executor), so every parse in kiln goes through here: one at a time, and
retried when a parse elsewhere in the process (not under this lock) still trips it. Importing
torch parses too (about a hundred `ast.parse` calls through `torch.jit`), so kiln's background
imports take the same lock (`LOCK`).
"""

from __future__ import annotations

import ast
import threading

LOCK = threading.RLock()
_MISMATCH = "AST constructor recursion depth mismatch"
ATTEMPTS = 3


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse(source, filename)`; raises SyntaxError for bad source, like it."""
    for attempt in range(ATTEMPTS):
        try:
            with LOCK:
                return ast.parse(source, filename=filename)
        except SystemError as err:
            if _MISMATCH not in str(err) or attempt == ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")
