"""Keys and names built from strings, for the allowlist's object rules (`static_objects`).

A subscript key, a `.get(...)` key, a `match` mapping key or a `str.format` field reaches into an
object by a name just as `getattr` does. `key_kind` says what the scan knows of one: `"private"`
(it folds to a dunder or `_private` name), `"opaque"` (a string built at run time that `Scope.fold`
can't evaluate: `chr(95) * 2 + ...`, `bytes(...).decode()`, an f-string with unknown holes), `"str"`
(a folded public name) or `"other"` (no string at all, as far as the scan can tell: integers,
slices, tuples, tensors, parameters, names bound to numbers). `containers` lists the names the file binds only to dicts, lists, tuples and
sets it builds itself; an opaque key into one of those reaches nothing but the file's own data.
"""

from __future__ import annotations

import ast
import string
from _string import formatter_field_name_split
from collections.abc import Iterator

from kiln.tools.integrity.resolve import Scope, _target_key

STR_METHODS = frozenset({
    "join", "format", "format_map", "decode", "lower", "upper", "strip", "lstrip", "rstrip", "replace",
    "title", "capitalize", "swapcase", "casefold", "center", "ljust", "rjust", "zfill", "removeprefix",
    "removesuffix", "translate", "expandtabs",
})
STR_BUILTINS = frozenset({"str", "chr", "repr", "ascii", "format"})
_CONTAINER_CALLS = frozenset({"builtins.dict", "builtins.list", "builtins.tuple", "builtins.set",
                              "collections.OrderedDict", "collections.defaultdict", "collections.Counter",
                              "collections.deque"})
_DISPLAYS = (ast.Dict, ast.List, ast.Tuple, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)


def is_private(name: str) -> bool:
    """A dunder or `_private` identifier (what `getattr` or a namespace dict would be asked for)."""
    return name.isidentifier() and name.startswith("_") and len(name) > 1


class Keys:
    """What the file binds to string-valued names, and which names hold containers it built."""

    def __init__(self, nodes: list[ast.AST], scope: Scope) -> None:
        self.scope = scope
        self._kinds: dict[int, tuple[ast.AST, str]] = {}
        self.bindings: dict[str, list[ast.AST]] = {}
        for target, value in _bindings(nodes):
            self.bindings.setdefault(target, []).append(value)
        self.containers = {k for k, vs in self.bindings.items() if all(self._is_display(v) for v in vs)}
        self.containers |= _star_kwargs(nodes)

    def key_kind(self, node: ast.AST) -> str:
        """`private`, `opaque`, `str` (a folded public name) or `other` (not a string)."""
        key = id(node)
        if key not in self._kinds:
            self._kinds[key] = (node, "other")  # a cycle through bindings adds nothing; the node is kept
            self._kinds[key] = (node, self._kind(node))  # alive so its id is never reused
        return self._kinds[key][1]

    def _kind(self, node: ast.AST) -> str:
        if isinstance(node, ast.Name):  # what it is bound to, not the fold's (lossy) memory of it
            kinds = {self.key_kind(v) for v in self.bindings.get(node.id, ())}
            return next((k for k in ("private", "opaque", "str") if k in kinds), "other")
        folded = self.scope.fold(node) if self.exact(node) else None
        if folded is not None:
            return "private" if is_private(folded) else "str"
        return "opaque" if self._stringish(node) else "other"

    def exact(self, node: ast.AST) -> bool:
        """Is `Scope.fold` exact on this expression? It drops f-string holes, `str.format` fields and
        `join` pieces it can't evaluate (right for spotting a name assembled around them, wrong for
        reading a key or a template), and remembers a name by its last foldable binding."""
        for n in ast.walk(node):
            if isinstance(n, ast.FormattedValue) and (self.scope.fold(n.value) is None or not self.exact(n.value)):
                return False
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("format", "format_map"):
                return False
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "join" and n.args and \
                    isinstance(n.args[0], ast.List | ast.Tuple) and any(
                        self.scope.fold(e) is None for e in n.args[0].elts):
                return False
            if isinstance(n, ast.Name) and n is not node and self.key_kind(n) == "opaque":
                return False
            if isinstance(n, ast.Name) and n is node and self.key_kind(n) != "str":
                return False
        return True

    def _stringish(self, node: ast.AST) -> bool:
        """Does this expression build a string the fold could not evaluate?"""
        if isinstance(node, ast.Constant):
            return isinstance(node.value, str | bytes)
        if isinstance(node, ast.JoinedStr):
            return True
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mult | ast.Mod):
            return self._part(node.left) or self._part(node.right)
        if isinstance(node, ast.Call):
            f = node.func
            return (isinstance(f, ast.Name) and f.id in STR_BUILTINS) or (isinstance(f, ast.Attribute)
                                                                           and f.attr in STR_METHODS)
        if isinstance(node, ast.Subscript):
            return self._part(node.value)
        if isinstance(node, ast.IfExp):
            return self._part(node.body) or self._part(node.orelse)
        if isinstance(node, ast.NamedExpr):
            return self._part(node.value)
        return False

    def _part(self, node: ast.AST) -> bool:
        return self.key_kind(node) != "other" or self._stringish(node)

    def is_container(self, node: ast.AST) -> bool:
        """An object the file built itself: a display, or a name bound only to displays."""
        if isinstance(node, _DISPLAYS):
            return True
        key = _target_key(node)
        return key is not None and key in self.containers

    def _is_display(self, value: ast.AST) -> bool:
        if isinstance(value, _DISPLAYS):
            return True
        return isinstance(value, ast.Call) and bool(self.scope.resolve(value.func) & _CONTAINER_CALLS)


def _bindings(nodes: list[ast.AST]) -> Iterator[tuple[str, ast.AST]]:
    """(target key, bound value) for every simple binding; a `for` target over a display is bound
    to each element."""
    for n in nodes:
        if isinstance(n, ast.Assign):
            for t in n.targets:
                yield from _pairs(t, n.value)
        elif isinstance(n, ast.AnnAssign | ast.AugAssign | ast.NamedExpr) and n.value is not None:
            yield from _pairs(n.target, n.value)
        elif isinstance(n, ast.For | ast.AsyncFor | ast.comprehension):
            elts = n.iter.elts if isinstance(n.iter, ast.List | ast.Tuple | ast.Set) else []
            for e in elts:
                yield from _pairs(n.target, e)


def _pairs(target: ast.AST, value: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    if isinstance(target, ast.Tuple | ast.List):
        if isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts):
            for t, v in zip(target.elts, value.elts, strict=True):
                yield from _pairs(t, v)
        return
    key = _target_key(target)
    if key is not None:
        yield key, value


def _star_kwargs(nodes: list[ast.AST]) -> set[str]:
    """`**kwargs` parameters: dicts the call builds."""
    return {n.args.kwarg.arg for n in nodes
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) and n.args.kwarg}


def format_fields(template: str) -> Iterator[str]:
    """Every attribute name and index key a `str.format` template reaches (`{0.__class__}` gives
    `__class__`, `{0[x]}` gives `x`, nested specs included). Malformed templates give nothing (the
    call raises)."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError:
        return
    for _literal, field, spec, _conv in parsed:
        if field:
            yield from _field_parts(field)
        if spec and "{" in spec:
            yield from format_fields(spec)


def _field_parts(field: str) -> Iterator[str]:
    try:
        _first, rest = formatter_field_name_split(field)  # the parser str.format itself uses
        for _is_attr, part in rest:
            yield str(part)
    except ValueError:
        return
