"""The candidate's own classes, for the allowlist's object rules (`static_objects`).

`static_objects` lets a method reach a private or Triton-named attribute on `self` when its class
defines that attribute (`self._cache`, `self.kernel`). That is only safe while `self` really is an
instance of the class, so this module also refuses the ways to call a method with another object as
`self` (a Triton function, a kernel's config): taking a plain method unbound (`A.m(tl.sum)`,
`getattr(A, "m")`), handing a class object to code the scan can't follow (`x = A`, `f(A)`), class
and method decorators the file defines (they receive the raw class or function), and rebinding a
method's first parameter (`self = other`, a nested `def f(self)`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from kiln.tools.integrity.resolve import Scope
from kiln.tools.records import Finding

_RULE = "static.dynamic-access"
_SETTERS = frozenset({"setter", "getter", "deleter"})


@dataclass
class ClassFacts:
    names: set[str] = field(default_factory=set)
    """Classes the file defines."""
    plain_methods: dict[str, set[str]] = field(default_factory=dict)
    """Class -> the methods that take `self` (neither static nor class methods) of any class the
    file defines (a subclass inherits them), and class-body aliases and nested classes."""
    own: set[str] = field(default_factory=set)
    """Attribute names the file defines: class-body members and stores on a method's `self`."""
    self_of: dict[int, str] = field(default_factory=dict)
    """id(method) -> the name of its `self` (or `cls`), for methods that never rebind it."""
    defined: set[str] = field(default_factory=set)
    """Every name the file binds (so a builtin it shadows is not trusted as the builtin)."""


def class_facts(nodes: list[ast.AST]) -> ClassFacts:
    facts = ClassFacts(defined={n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(
        n.ctx, ast.Load)} | {n.name for n in nodes if isinstance(n, ast.FunctionDef | ast.ClassDef)})
    for cls in (n for n in nodes if isinstance(n, ast.ClassDef)):
        facts.names.add(cls.name)
        plain = facts.plain_methods.setdefault(cls.name, set())
        for item in cls.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                facts.own.add(item.name)
                kind = _method_kind(item)
                first = _first_param(item)
                if kind == "plain":
                    plain.add(item.name)
                if kind != "static" and first and not _rebinds(item, first):
                    facts.self_of[id(item)] = first
                    facts.own |= _stores_on(item, first)
            elif isinstance(item, ast.ClassDef):
                facts.own.add(item.name)
                plain.add(item.name)  # `A.B` hands out a class object too
            elif isinstance(item, ast.Assign | ast.AnnAssign):
                targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                names = {t.id for t in targets if isinstance(t, ast.Name)}
                facts.own |= names
                if item.value is not None and _holds_a_function(item.value, cls):
                    plain |= names  # `n = m`, `s = staticmethod(m)`, `f = lambda self: ...`: methods too
    every = set().union(*facts.plain_methods.values()) if facts.plain_methods else set()
    facts.plain_methods = {c: every for c in facts.plain_methods}  # a subclass inherits them: B.m is A.m
    return facts


def _holds_a_function(value: ast.AST, cls: ast.ClassDef) -> bool:
    """Does a class-body value hold a function of the class, or any lambda (`property(m)`,
    `{"a": m}`), so that reading it from the class hands out a function to call with any self?"""
    methods = {i.name for i in cls.body if isinstance(i, ast.FunctionDef | ast.AsyncFunctionDef)}
    return any(isinstance(n, ast.Lambda) or (isinstance(n, ast.Name) and n.id in methods) for n in ast.walk(value))


def _method_kind(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    names = {d.id for d in fn.decorator_list if isinstance(d, ast.Name)}
    return "static" if "staticmethod" in names else "class" if "classmethod" in names else "plain"


def _first_param(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    params = fn.args.posonlyargs + fn.args.args
    return params[0].arg if params else None


def _rebinds(fn: ast.AST, name: str) -> bool:
    """Is `name` stored, deleted or shadowed by a nested function's parameter anywhere inside?"""
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load):
            return True
        if n is not fn and isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) and name in {
                a.arg for a in ast.walk(n.args) if isinstance(a, ast.arg)}:
            return True
        if isinstance(n, ast.MatchAs | ast.MatchStar) and n.name == name:
            return True
    return False


def _stores_on(fn: ast.AST, name: str) -> set[str]:
    return {n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load)
            and isinstance(n.value, ast.Name) and n.value.id == name}


def scan_classes(nodes: list[ast.AST], scope: Scope, facts: ClassFacts, parents: dict[int, ast.AST], *,
                 filename: str) -> list[Finding]:
    """The ways to run a method with a `self` that is not an instance of its class."""
    def finding(evidence: str, node: ast.AST) -> Finding:
        return Finding(rule=_RULE, severity="reject", evidence=evidence, line=getattr(node, "lineno", None),
                       file=filename)

    out = [finding(ev, n) for ev, n in _decorator_problems(nodes, scope, facts, parents)]
    notes = _annotation_ids(nodes)
    for n in nodes:
        if isinstance(n, ast.Name) and n.id in facts.names and isinstance(n.ctx, ast.Load) and id(n) not in notes:
            why = _class_use_problem(n, parents, facts, scope)
            if why:
                out.append(finding(why, n))
    return out


_TYPE_CHECKS = frozenset({"isinstance", "issubclass", "super"})


def _class_use_problem(node: ast.Name, parents: dict[int, ast.AST], facts: ClassFacts, scope: Scope) -> str | None:
    name, parent = node.id, parents.get(id(node))
    methods = facts.plain_methods.get(name, set())
    if isinstance(parent, ast.Attribute) and parent.value is node:
        if parent.attr in methods and parent.attr != "__init__":  # Base.__init__(self): static_objects checks self
            return (f"takes the method {name}.{parent.attr} unbound: called with another object as self, it "
                    "reaches that object's attributes under the class's own names")
        return None
    if isinstance(parent, ast.Call) and parent.func is node:
        return None  # instantiation
    if isinstance(parent, ast.Call) and _named_access_on(parent, node, scope):
        name_arg = _literal(parent)
        return f"takes the method {name}.{name_arg} unbound through getattr" if name_arg in methods else None
    if isinstance(parent, ast.Tuple):
        parent = parents.get(id(parent))  # isinstance(x, (A, B)), except (A, B)
    if isinstance(parent, ast.ClassDef | ast.ExceptHandler | ast.Compare):
        return None  # a base class, an exception type, an identity test
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id in _TYPE_CHECKS \
            and parent.func.id not in facts.defined:
        return None
    return (f"uses the class {name} as a value the scan can't follow (a function given the class can call its "
            "methods with any object as self); instantiate it, or reach its static and class methods by name")


def _annotation_ids(nodes: list[ast.AST]) -> set[int]:
    roots: list[ast.AST] = []
    for n in nodes:
        if isinstance(n, ast.arg | ast.AnnAssign) and n.annotation is not None:
            roots.append(n.annotation)
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.returns is not None:
            roots.append(n.returns)
    return {id(x) for r in roots for x in ast.walk(r)}


def _named_access_on(call: ast.Call, node: ast.AST, scope: Scope) -> bool:
    return bool(call.args) and call.args[0] is node and bool(scope.resolve(call.func) & {
        "builtins.getattr", "builtins.hasattr", "builtins.setattr", "builtins.delattr"})


def _literal(call: ast.Call) -> str | None:
    a = call.args[1] if len(call.args) > 1 else None
    return a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None


def _decorator_problems(nodes: list[ast.AST], scope: Scope, facts: ClassFacts,
                        parents: dict[int, ast.AST]) -> Iterator[tuple[str, ast.AST]]:
    """Class decorators and method decorators must be library ones (they receive the raw class or
    function): `dataclass`, `functools.*`, `staticmethod`, `property` and its `.setter`, ..."""
    for n in nodes:
        if isinstance(n, ast.ClassDef):
            decs, what = n.decorator_list, f"class {n.name}"
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and isinstance(parents.get(id(n)), ast.ClassDef):
            decs, what = n.decorator_list, f"method {n.name}"
        else:
            continue
        for d in decs:
            target = d.func if isinstance(d, ast.Call) else d
            if isinstance(d, ast.Call) and _hands_on_own_code(d, scope, facts):
                yield f"the {what} has a decorator that hands it to code the file defines", d
            elif _library(target, scope) or (isinstance(target, ast.Attribute) and target.attr in _SETTERS
                                           and isinstance(target.value, ast.Name) and target.value.id in facts.own):
                continue
            yield (f"the {what} has a decorator the file defines: it receives the raw "
                   f"{'class' if isinstance(n, ast.ClassDef) else 'function'} and can call it with any object"), d


def _hands_on_own_code(call: ast.Call, scope: Scope, facts: ClassFacts) -> bool:
    """`functools.partial(my_deco, ...)`: a library decorator factory given the file's own function."""
    args = list(call.args) + [k.value for k in call.keywords]
    return any(isinstance(a, ast.Lambda) or (isinstance(a, ast.Name) and a.id in facts.defined
                                             and not scope.resolve(a)) for a in args)


def _library(node: ast.AST, scope: Scope) -> bool:
    """Does the decorator name something from a module or a builtin (not a function of the file)?"""
    return bool(scope.resolve(node)) or (isinstance(node, ast.Name) and node.id in (
        "staticmethod", "classmethod", "property"))
