"""kiln's parses never overlap across threads, and a stray CPython recursion-depth SystemError
(another thread's `ast.parse` outside kiln) is retried, not reported as broken source."""

from __future__ import annotations

import ast
import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from kiln.graphs.cases import static_problem
from kiln.tools import pyparse

PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.rand(4)]


def get_init_inputs():
    return []
"""


class _Overlap:
    """Stands in for `ast.parse`: yields the GIL mid-parse and records how many parses overlap."""

    def __init__(self) -> None:
        self.real = ast.parse
        self.inside = 0
        self.most = 0
        self.lock = threading.Lock()

    def __call__(self, source: str, *args: object, **kw: object) -> ast.Module:
        with self.lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
        try:
            time.sleep(0.01)  # what a finaliser run by a collection in the middle of a parse can do
            return self.real(source, *args, **kw)
        finally:
            with self.lock:
                self.inside -= 1


def test_parses_from_many_threads_never_overlap(monkeypatch: pytest.MonkeyPatch) -> None:
    probe = _Overlap()
    monkeypatch.setattr(ast, "parse", probe)
    case = PROBLEM.replace("torch.rand(4)", "torch.rand(7)")
    with ThreadPoolExecutor(8) as pool:  # as the Proposer's cases are validated: side by side
        verdicts = list(pool.map(lambda _: static_problem(case, PROBLEM), range(16)))
    assert verdicts == [None] * 16
    assert probe.most == 1


def test_the_overlap_probe_sees_unserialised_parses(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe above can fail: plain `ast.parse` from several threads does overlap."""
    probe = _Overlap()
    monkeypatch.setattr(ast, "parse", probe)
    def parse(_: int) -> None:
        with contextlib.suppress(SystemError):  # CPython's recursion-depth mismatch: what overlapping parses cause
            ast.parse(PROBLEM)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(parse, range(16)))
    assert probe.most > 1


def test_recursion_depth_mismatch_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    real, calls = ast.parse, []

    def flaky(source: str, *args: object, **kw: object) -> ast.Module:
        calls.append(kw.get("filename"))
        if len(calls) == 1:
            raise SystemError("AST constructor recursion depth mismatch (before=27, after=24)")
        return real(source, *args, **kw)

    monkeypatch.setattr(ast, "parse", flaky)
    tree = pyparse.parse(PROBLEM, filename="problem.py")
    assert [n.name for n in tree.body if isinstance(n, ast.ClassDef)] == ["Model"]
    assert calls == ["problem.py", "problem.py"]


def test_other_errors_are_not_swallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(source: str, *args: object, **kw: object) -> ast.Module:
        raise SystemError("something else")

    monkeypatch.setattr(ast, "parse", broken)
    with pytest.raises(SystemError, match="something else"):
        pyparse.parse(PROBLEM)
    monkeypatch.undo()
    with pytest.raises(SyntaxError):
        pyparse.parse("def broken(:\n")


def test_a_mismatch_every_time_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    def always(source: str, *args: object, **kw: object) -> ast.Module:
        raise SystemError("AST constructor recursion depth mismatch (before=1, after=0)")

    monkeypatch.setattr(ast, "parse", always)
    with pytest.raises(SystemError, match="recursion depth mismatch"):
        pyparse.parse(PROBLEM)
