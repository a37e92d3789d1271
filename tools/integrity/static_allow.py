"""The allowlist pass of the static scan (the default for LLM-written code).

Where the denylist rules name known cheats, this pass names what a kernel may use and refuses the
rest, so a way around that nobody listed is refused too:

- `static.import-not-allowed`: an import outside `static_policy.ALLOWED`, or a name reached through
  an allowed module that is not on its list (`torch.sys`, `torch._C`, `triton.runtime`, `F.np`),
  and `x.numpy()`;
- `static.dynamic-access`: `getattr`/`setattr`/`delattr`/`hasattr` with a name that is not a string
  literal, those builtins passed around as values, a module passed around as a value (where the
  scan could not follow it), dunder access beyond `__init__`/`__name__`, special methods that hook
  attribute access or object life, metaclasses, format strings that walk attributes, and
  `eval`/`exec`/`compile`/`globals`/`vars`/`type`/...;
- `static.builtin-not-allowed`: a name neither defined in the file nor an allowed builtin;
- `static.monkey-patch`: rebinding an attribute of a function the file defines (a Triton kernel's
  `run`).

Code under `if __name__ == "__main__":` never runs when kiln imports the file and is skipped.
Every finding is a rejection with a line and plain-words evidence.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from kiln.tools.integrity import static_policy as P
from kiln.tools.integrity.resolve import Scope
from kiln.tools.records import Finding

_NAMED_ACCESS = {"builtins.getattr", "builtins.setattr", "builtins.delattr", "builtins.hasattr"}
_DYNAMIC_BUILTINS = {
    "eval": "evaluates a string as code", "exec": "executes a string as code", "compile": "compiles a string as code",
    "globals": "reads the module's namespace", "locals": "reads a frame's namespace", "vars": "reads an object's namespace",
    "dir": "lists an object's attributes", "type": "reaches an object's class (type(k).run = ... patches it)",
    "delattr": "deletes attributes", "breakpoint": "starts a debugger",
}
_FIELD = re.compile(r"\{[^{}\n]*\}")  # a format field; searched in it, one pass: a single regex with a lazy
_WALK = re.compile(r"\.(?:_|f_|gi_|tb_|cr_|co_)")  # and a greedy part took 48 s on "{" + "._" * 120000


def scan_allowlist(tree: ast.Module, scope: Scope, *, filename: str) -> list[Finding]:
    v = _AllowVisitor(tree, scope, filename)
    v.visit(tree)
    return v.findings


class AllowlistVisitor(ast.NodeVisitor):
    """Base of the allowlist's passes: every finding a rejection with a line, and the code under
    `if __name__ == "__main__":` skipped (it never runs when kiln imports the file)."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.findings: list[Finding] = []

    def add(self, rule: str, evidence: str, node: ast.AST) -> None:
        self.findings.append(Finding(rule=rule, severity="reject", evidence=evidence,
                                     line=getattr(node, "lineno", None), file=self.filename))

    def visit_If(self, node: ast.If) -> None:
        if _is_main_guard(node.test):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)


class _AllowVisitor(AllowlistVisitor):
    def __init__(self, tree: ast.Module, scope: Scope, filename: str) -> None:
        super().__init__(filename)
        self.scope = scope
        self.parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
        self.bound = _bound_names(tree)
        self.defs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}

    # ------------------------------------------------------------------ structure

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if _is_dunder(node.name) and node.name not in P.ALLOWED_DUNDER_DEFS:
            self.add("static.dynamic-access", f"defines the special method {node.name}, which hooks attribute "
                     "access, object life or class creation", node)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815 - ast.NodeVisitor naming

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for kw in node.keywords:
            self.add("static.dynamic-access", f"class {node.name} passes {kw.arg or '**kwargs'}= to its "
                     "creation (a metaclass or class hook runs code when the class is built)", node)
        self.generic_visit(node)

    # ------------------------------------------------------------------ imports
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._check_module(a.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = node.module or ""
        if node.level:
            self.add("static.import-not-allowed", f"relative import (from {'.' * node.level}{mod}): "
                     "a candidate is one file", node)
            return
        if not self._check_module(mod, node):
            return
        for a in node.names:
            if a.name == "*":
                self.add("static.import-not-allowed", f"from {mod} import *: name what you use", node)
            else:
                self._check_qual(f"{mod}.{a.name}", node)

    def _check_module(self, mod: str, node: ast.AST) -> bool:
        parts = mod.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            parent_ok = i == 1 or parts[i - 1] in P.ALLOWED.get(".".join(parts[:i - 1]), ())
            if prefix not in P.ALLOWED or not parent_ok:
                self.add("static.import-not-allowed", f"imports {mod}, which is not on the allowlist for "
                         f"LLM-written kernels (modules: {P.allowed_modules_text()})", node)
                return False
        return True

    # ------------------------------------------------------------------ names and attributes
    def visit_Name(self, node: ast.Name) -> None:
        if _is_dunder(node.id):
            if node.id not in P.ALLOWED_DUNDER_NAMES:
                self.add("static.dynamic-access", f"uses {node.id}", node)
        elif isinstance(node.ctx, ast.Load):
            self._check_free_name(node)
            self._check_value(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _is_dunder(node.attr) and node.attr not in P.ALLOWED_DUNDER_ATTRS:
            self.add("static.dynamic-access", f"reaches the special attribute .{node.attr}", node)
        elif node.attr in P.REFUSED_METHODS:
            why = ("numpy is not on the allowlist; compute in your kernel" if "numpy" in node.attr or "array" in node.attr
                   else "hooks run code where kiln does not look; no kernel needs one")
            self.add("static.import-not-allowed", f".{node.attr}(): {why}", node)
        if isinstance(node.ctx, ast.Load):
            self._check_value(node)
        elif isinstance(node.value, ast.Name) and node.value.id in self.defs:
            self.add("static.monkey-patch", f"rebinds {node.value.id}.{node.attr} on a function the file "
                     "defines (a kernel's launcher)", node)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Load):
            for q in self.scope.resolve(node):
                self._check_qual(q, node)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and "__global__" not in node.value:
            m = next((f for f in _FIELD.finditer(node.value) if _WALK.search(f.group(0))), None)
            if m:
                self.add("static.dynamic-access", f"a format string walks attributes: {m.group(0)[:200]!r}", node)

    def visit_Call(self, node: ast.Call) -> None:
        funcs = self.scope.resolve(node.func)
        if funcs & _NAMED_ACCESS and not _literal_name(node):
            self.add("static.dynamic-access", f"{_short(funcs & _NAMED_ACCESS)} with a name that is not a "
                     "string literal: the scan can't see what it reaches", node)
        elif funcs & _NAMED_ACCESS and len(node.args) >= 2:
            self._check_setattr_on_def(node, funcs)
            name = node.args[1].value  # type: ignore[attr-defined]  # a str literal (checked above)
            if _is_dunder(name) and name not in P.ALLOWED_DUNDER_ATTRS:
                self.add("static.dynamic-access", f"{_short(funcs & _NAMED_ACCESS)} reaches the special "
                         f"attribute {name}", node)
        if _call_name(node) in _BUILDERS:
            self._check_build_args(node)
        for q in funcs:
            self._check_qual(q, node.func)
        for q in self.scope.resolve(node):  # getattr(torch, "sys") denotes torch.sys
            self._check_qual(q, node)
        self.generic_visit(node)

    def _check_build_args(self, node: ast.Call) -> None:
        for kw in node.keywords:
            if kw.arg == "build_directory":
                self.add("static.env-or-file", "build_directory= writes the build outside kiln's per-candidate "
                         "cache", node)
            elif kw.arg and kw.arg.startswith("extra_"):
                for flag in _strings(kw.value, self.scope):
                    if _risky_flag(flag):
                        self.add("static.env-or-file", f"build flag {flag!r} reads or links files outside the "
                                 "build (absolute paths, '..', response files, forced includes)", node)

    def _check_setattr_on_def(self, node: ast.Call, funcs: set[str]) -> None:
        target = node.args[0]
        if funcs & {"builtins.setattr", "builtins.delattr"} and isinstance(target, ast.Name) and target.id in self.defs:
            self.add("static.monkey-patch", f"{_short(funcs)} on {target.id}, a function the file defines", node)

    # ------------------------------------------------------------------ shared checks
    def _check_free_name(self, node: ast.Name) -> None:
        name = node.id
        if name in self.bound or name in P.ALLOWED_BUILTINS:
            return
        if name in _DYNAMIC_BUILTINS:
            self.add("static.dynamic-access", f"{name}() {_DYNAMIC_BUILTINS[name]}", node)
        else:
            self.add("static.builtin-not-allowed", f"uses {name}, which is neither defined in the file nor "
                     "an allowed builtin", node)

    def _check_value(self, node: ast.Name | ast.Attribute) -> None:
        quals = self.scope.resolve(node)
        for q in quals:
            self._check_qual(q, node)
        parent = self.parents.get(id(node))
        if quals & _NAMED_ACCESS and not (isinstance(parent, ast.Call) and parent.func is node):
            self.add("static.dynamic-access", f"passes {_short(quals & _NAMED_ACCESS)} around as a value", node)
        mods = sorted(q for q in quals if q in P.ALLOWED)
        in_class = isinstance(self.parents.get(id(parent)), ast.ClassDef)
        if mods and not _module_use_ok(node, parent, self.scope, in_class=in_class):
            self.add("static.dynamic-access", f"uses the module {mods[0]} as a value (where the scan can't "
                     "follow it); name what you use from it", node)

    def _check_qual(self, q: str, node: ast.AST) -> None:
        why = refusal(q)
        if why:
            self.add("static.import-not-allowed", why, node)


_BUILDERS = frozenset({"load_inline", "CudaKernel"})
_RISKY_FLAG = re.compile(r"(^@)|(^-include)|(^-imacros)|(--pre-include)|(-Wl,)|(-Xlinker)|(^|[=\s,])(/|~)|(\.\.)")


def _call_name(node: ast.Call) -> str:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _strings(node: ast.AST, scope: Scope) -> list[str]:
    elts = node.elts if isinstance(node, ast.List | ast.Tuple) else [node]
    return [s for s in (scope.fold(e) for e in elts) if s is not None]


def _risky_flag(flag: str) -> bool:
    return bool(_RISKY_FLAG.search(flag.strip()))


def refusal(q: str) -> str | None:
    """Why the dotted name `q` is not on the allowlist, or None (allowed, or not rooted in an
    allowed module: the import says so)."""
    parts = q.split(".")
    mod = parts[0]
    if mod not in P.ALLOWED:
        return None
    for i, name in enumerate(parts[1:], start=1):
        if _is_dunder(name):
            return None  # the dunder rule speaks
        sub = f"{mod}.{name}"
        if sub in P.ALLOWED and name in P.ALLOWED[mod]:
            mod = sub
            continue
        reached = ".".join(parts[:i + 1])
        if name.startswith("_"):
            return f"{reached} is a private part of {mod}: not on the allowlist" + _hint(reached)
        if name not in P.ALLOWED[mod]:
            return f"{reached} is not on the allowlist of what a kernel may use from {mod}" + _hint(reached)
        if mod.split(".")[0] == "triton" and i + 1 < len(parts):
            return (f"{q} reaches into {reached}: attributes of Triton's functions (tl.sum.fn, ...) lead to their "
                    "module's globals")
        private = next((p for p in parts[i + 1:] if p.startswith("_") and not _is_dunder(p)), None)
        return f"{q} reaches the private attribute {private}" if private else None
    return None


def _hint(q: str) -> str:
    hint = next((h for p, h in P.ATTRS_HINT.items() if q == p or q.startswith(p + ".")), None)
    return f" ({hint})" if hint else ""


def _module_use_ok(node: ast.AST, parent: ast.AST | None, scope: Scope, *, in_class: bool = False) -> bool:
    """A module may be the base of an attribute, the value of a plain alias (`T = torch`, which the
    scan follows), or the object of a `getattr` with a literal name."""
    if isinstance(parent, ast.Attribute) and parent.value is node:
        return True
    if isinstance(parent, ast.Assign) and parent.value is node:  # not in a class body: `A.t.sys` is not followed
        return all(isinstance(t, ast.Name) for t in parent.targets) and not in_class

    if isinstance(parent, ast.Call) and parent.args and parent.args[0] is node:
        return bool(scope.resolve(parent.func) & _NAMED_ACCESS) and _literal_name(parent)
    return False


def _literal_name(call: ast.Call) -> bool:
    return len(call.args) >= 2 and isinstance(call.args[1], ast.Constant) and isinstance(call.args[1].value, str)


def _short(quals: set[str]) -> str:
    return sorted(quals)[0].removeprefix("builtins.")


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _is_main_guard(test: ast.AST) -> bool:
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == "__main__")


def _bound_names(tree: ast.Module) -> set[str]:
    """Every name the file binds anywhere (over-approximated across scopes)."""
    return set(_bindings(tree))


def _bindings(tree: ast.Module) -> Iterator[str]:
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            yield n.id
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield n.name
        elif isinstance(n, ast.arg):
            yield n.arg
        elif isinstance(n, ast.alias):
            yield (n.asname or n.name).split(".")[0]
        elif isinstance(n, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and n.name:
            yield n.name
        elif isinstance(n, ast.MatchMapping) and n.rest:
            yield n.rest
        elif isinstance(n, ast.Global | ast.Nonlocal):
            yield from n.names
        elif type(n).__name__ in ("TypeVar", "ParamSpec", "TypeVarTuple"):
            yield n.name  # type: ignore[attr-defined]
