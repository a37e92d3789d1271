"""Load and validate problem, case and candidate files by AST, in the parent (no candidate code runs).

A problem is a KernelBench file: `class Model(nn.Module)`, `get_inputs()`, `get_init_inputs()`.
A candidate defines `class ModelNew` whose constructor and forward accept the same arguments.
An extra case (`--case FILE`) is in problem format; its `Model` is optional (default: the problem's).
Every defect is one `KilnInputError` line naming the file (and line when there is one).
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

from pydantic import BaseModel, Field

from kiln.tools import pyparse
from kiln.tools.errors import KilnInputError


class Signature(BaseModel):
    """Positional arguments a method accepts (self excluded)."""

    names: list[str] = Field(default_factory=list)
    n_required: int = 0
    varargs: bool = False
    line: int | None = None
    known: bool = True  # False when the class inherits a method we cannot see

    def accepts(self, other: Signature) -> bool:
        """Can every call that fits `other` also call this one?"""
        if not self.known or not other.known or self.varargs:
            return True
        return self.n_required <= other.n_required and len(self.names) >= len(other.names)

    def render(self, method: str) -> str:
        args = ", ".join(["self", *self.names, *(["*args"] if self.varargs else [])])
        return f"{method}({args})"


class ProblemInfo(BaseModel):
    """A validated problem (or case) file."""

    path: str
    name: str
    sha256: str
    has_model: bool = True
    init: Signature = Field(default_factory=Signature)
    forward: Signature = Field(default_factory=Signature)


class CandidateInfo(BaseModel):
    """A validated candidate file."""

    path: str
    source: str
    sha256: str
    init: Signature = Field(default_factory=Signature)
    forward: Signature = Field(default_factory=Signature)


def _read(path: Path, what: str) -> tuple[str, ast.Module]:
    if not path.is_file():
        raise KilnInputError(f"{what} file not found: {path}")
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise KilnInputError(f"cannot read {what} file {path}: {err}") from err
    try:
        tree = pyparse.parse(source, filename=str(path))
    except SyntaxError as err:
        raise KilnInputError(f"{path}:{err.lineno}: syntax error in {what}: {err.msg}") from err
    except (RecursionError, MemoryError) as err:  # nested past what Python's parser builds
        raise KilnInputError(f"{path}: {what} nests too deeply to parse ({type(err).__name__})") from err
    return source, tree


def _top_level(tree: ast.Module) -> dict[str, ast.AST]:
    """Top-level names: classes, functions, plain assignments (`ModelNew = Other`), imports."""
    names: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = node
    return names


def _signature(fn: ast.FunctionDef) -> Signature:
    pos = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)][1:]  # drop self
    n_defaults = len(fn.args.defaults)
    return Signature(names=pos, n_required=max(0, len(pos) - n_defaults),
                     varargs=fn.args.vararg is not None, line=fn.lineno)


def _is_module_base(base: ast.expr) -> bool:
    return (isinstance(base, ast.Attribute) and base.attr == "Module") or (
        isinstance(base, ast.Name) and base.id == "Module")


def _method(cls: ast.AST | None, name: str, classes: dict[str, ast.AST]) -> Signature | None:
    """Signature of `cls.name`, following single-file bases. None: not defined, the class is a plain
    nn.Module; `known=False`: inherited from a class outside this file (assignment, import, ...)."""
    for _ in range(10):
        if not isinstance(cls, ast.ClassDef):
            return Signature(known=False)
        for node in cls.body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return _signature(node)
        if not cls.bases or all(_is_module_base(b) for b in cls.bases):
            return None
        base = cls.bases[0]
        cls = classes.get(base.id) if isinstance(base, ast.Name) else None
    return Signature(known=False)


def _require(names: dict[str, ast.AST], name: str, path: Path, what: str, kind: str) -> ast.AST:
    node = names.get(name)
    if node is None:
        raise KilnInputError(f"{path}: no {kind} `{name}` in {what} (KernelBench format needs it)")
    return node


def load_problem(path: Path, *, what: str = "problem", model_optional: bool = False) -> ProblemInfo:
    """Validate a problem (or, with `model_optional`, an extra case) file; raise KilnInputError."""
    path = Path(path)
    source, tree = _read(path, what)
    names = _top_level(tree)
    for fn in ("get_inputs", "get_init_inputs"):
        _require(names, fn, path, what, "function")
    has_model = "Model" in names
    if not has_model and not model_optional:
        _require(names, "Model", path, what, "class")
    model = names.get("Model")
    forward = _method(model, "forward", names) if has_model else Signature(known=False)
    if forward is None:
        raise KilnInputError(f"{path}:{getattr(model, 'lineno', 1)}: Model defines no forward() in {what}")
    return ProblemInfo(
        path=str(path.resolve()), name=path.stem, sha256=hashlib.sha256(source.encode()).hexdigest(),
        has_model=has_model, init=(_method(model, "__init__", names) or Signature()) if has_model
        else Signature(known=False), forward=forward,
    )


def load_candidate(path: Path, problem: ProblemInfo) -> CandidateInfo:
    """Validate a candidate against its problem: `ModelNew` exists, signatures are compatible."""
    path = Path(path)
    source, tree = _read(path, "candidate")
    names = _top_level(tree)
    node = _require(names, "ModelNew", path, "candidate", "class")
    forward = _method(node, "forward", names)
    if forward is None:
        raise KilnInputError(f"{path}:{getattr(node, 'lineno', 1)}: ModelNew defines no forward()")
    info = CandidateInfo(
        path=str(path.resolve()), source=source, sha256=hashlib.sha256(source.encode()).hexdigest(),
        init=_method(node, "__init__", names) or Signature(), forward=forward,
    )
    for method, mine, ref in (("__init__", info.init, problem.init), ("forward", info.forward, problem.forward)):
        if not mine.accepts(ref):
            line = f":{mine.line}" if mine.line else ""
            raise KilnInputError(
                f"{path}{line}: ModelNew.{mine.render(method)} does not match "
                f"Model.{ref.render(method)} (same positional arguments needed)"
            )
    return info


