"""Name resolution for the static scan: which module object does an expression denote?

`Scope` follows imports and simple assignments (`import torch as T`, `from torch import cuda`,
`c = T.cuda`, `self.t = torch`, `getattr(torch, "cu" + "da")`, `torch.__dict__["cuda"]`,
`__import__("torch")`, `importlib.import_module("torch")`) and maps each expression to the dotted
names it may denote ("torch.cuda.Stream"). `fold` evaluates string expressions built from
constants (concatenation, repetition, `chr(95)`, f-strings, `"".join`, slicing, `.format`), so a
name assembled from pieces is still seen.
"""

from __future__ import annotations

import ast
import re

BUILTINS = frozenset({
    "getattr", "setattr", "delattr", "open", "eval", "exec", "compile", "globals", "locals", "vars",
    "__import__", "breakpoint", "input", "type", "object", "super", "hasattr", "id",
})
_IMPORTERS = frozenset({"builtins.__import__", "importlib.import_module", "importlib.__import__"})


class Scope:
    """Dotted names bound to Python names, and string constants bound to names."""

    def __init__(self, tree: ast.AST) -> None:
        self.names: dict[str, set[str]] = {}
        self.strings: dict[str, str] = {}
        self.local_classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        for _ in range(4):  # fixpoint over chains of assignments, whatever their order
            changed = False
            for node in ast.walk(tree):
                changed |= self._bind(node)
            if not changed:
                break

    # ------------------------------------------------------------------ binding
    def _bind(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Import):
            return any(self._add(a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0])
                       for a in node.names)
        if isinstance(node, ast.ImportFrom):
            mod = "." * node.level + (node.module or "")
            return any(self._add(a.asname or a.name, f"{mod}.{a.name}" if mod else a.name) for a in node.names)
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            return any(self._bind_target(t, node.value) for t in targets)
        if isinstance(node, (ast.With, ast.AsyncWith)):
            return any(self._bind_target(i.optional_vars, i.context_expr) for i in node.items if i.optional_vars)
        return False

    def _bind_target(self, target: ast.AST, value: ast.AST) -> bool:
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)):
            return any(self._bind_target(t, v) for t, v in zip(target.elts, value.elts, strict=False))
        key = _target_key(target)
        if key is None:
            return False
        changed = False
        for q in self.resolve(value):
            changed |= self._add(key, q)
        s = self.fold(value)
        if s is not None and self.strings.get(key) != s:
            self.strings[key] = s
            changed = True
        return changed

    def _add(self, key: str, qual: str) -> bool:
        bucket = self.names.setdefault(key, set())
        if qual in bucket or len(bucket) > 16:
            return False
        bucket.add(qual)
        return True

    # ------------------------------------------------------------------ resolution
    def resolve(self, node: ast.AST) -> set[str]:
        """Dotted names `node` may denote; empty when unknown."""
        if isinstance(node, ast.Name):
            if node.id in self.names:
                return set(self.names[node.id])
            return {f"builtins.{node.id}"} if node.id in BUILTINS else set()
        if isinstance(node, ast.Attribute):
            key = _target_key(node)
            if key is not None and key in self.names:
                return set(self.names[key])
            return {f"{q}.{node.attr}" for q in self.resolve(node.value)}
        if isinstance(node, ast.Call):
            return self._resolve_call(node)
        if isinstance(node, ast.Subscript):
            return self._resolve_subscript(node)
        return set()

    def _resolve_call(self, node: ast.Call) -> set[str]:
        funcs = self.resolve(node.func)
        args = node.args
        if funcs & {"builtins.getattr"} and len(args) >= 2:
            name = self.fold(args[1])
            return {f"{q}.{name}" for q in self.resolve(args[0])} if name else set()
        if funcs & _IMPORTERS and args:
            name = self.fold(args[0])
            return {name} if name else set()
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("__getattribute__", "__getattr__") and args:
            name = self.fold(args[0])
            return {f"{q}.{name}" for q in self.resolve(node.func.value)} if name else set()
        return set()

    def _resolve_subscript(self, node: ast.Subscript) -> set[str]:
        base = dict_owner(node.value, self)
        name = self.fold(node.slice)
        if base and name:
            return {f"{q}.{name}" for q in base}
        return set()

    # ------------------------------------------------------------------ strings
    def fold(self, node: ast.AST | None) -> str | None:
        """The string value of a constant string expression, else None."""
        if node is None:
            return None
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else None
        if isinstance(node, ast.Name):
            return self.strings.get(node.id)
        if isinstance(node, ast.Attribute):
            key = _target_key(node)
            return self.strings.get(key) if key else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            a, b = self.fold(node.left), self.fold(node.right)
            return a + b if a is not None and b is not None else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):  # "_" * 2
            return _repeat(self.fold(node.left), _const_int(node.right)) or _repeat(self.fold(node.right),
                                                                                   _const_int(node.left))
        if isinstance(node, ast.JoinedStr):
            return "".join(self._fold_fpart(v) for v in node.values)
        if isinstance(node, ast.Subscript):
            return self._fold_slice(node)
        if isinstance(node, ast.Call):
            return self._fold_call(node)
        return None

    def _fold_fpart(self, v: ast.AST) -> str:
        if isinstance(v, ast.FormattedValue):
            return self.fold(v.value) or ""  # unknown holes vanish, so pieces around them still join
        return self.fold(v) or ""

    def _fold_slice(self, node: ast.Subscript) -> str | None:
        s = self.fold(node.value)
        sl = node.slice
        if s is None or not isinstance(sl, ast.Slice):
            return None
        parts = [_const_int(p) for p in (sl.lower, sl.upper, sl.step)]
        return s[slice(*parts)]

    def _fold_call(self, node: ast.Call) -> str | None:
        if isinstance(node.func, ast.Name) and len(node.args) == 1 and node.func.id not in self.names:
            if node.func.id == "chr" and _const_int(node.args[0]) is not None:  # chr(95)
                return chr(_const_int(node.args[0]) % 0x110000)  # type: ignore[operator]
            if node.func.id == "str":
                return self.fold(node.args[0])
        if not isinstance(node.func, ast.Attribute):
            return None
        base, attr = self.fold(node.func.value), node.func.attr
        if base is None:
            return None
        if attr == "join" and node.args and isinstance(node.args[0], (ast.List, ast.Tuple)):
            parts = [self.fold(e) for e in node.args[0].elts]
            return base.join(p for p in parts if p is not None)
        if attr == "format":
            return _strip_format_holes(base)
        if attr in ("lower", "upper", "strip", "lstrip", "rstrip", "title", "capitalize", "swapcase"):
            return str(getattr(base, attr)())
        if attr == "replace" and len(node.args) == 2:
            old, new = self.fold(node.args[0]), self.fold(node.args[1])
            return base.replace(old, new) if old is not None and new is not None else None
        return None


def dict_owner(node: ast.AST, scope: Scope) -> set[str]:
    """For `X.__dict__` or `vars(X)`: the dotted names X may denote."""
    if isinstance(node, ast.Attribute) and node.attr == "__dict__":
        return scope.resolve(node.value)
    if isinstance(node, ast.Call) and scope.resolve(node.func) & {"builtins.vars"} and node.args:
        return scope.resolve(node.args[0])
    return set()


def _target_key(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def _const_int(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        v = node.operand.value
        return -v if isinstance(v, int) else None
    return None


def _repeat(s: str | None, n: int | None) -> str | None:
    return s * n if s is not None and n is not None and n >= 0 and len(s) * n <= 4096 else None


def _strip_format_holes(s: str) -> str:
    """`str.format` template -> its literal text: `{{`/`}}` become braces, `{field}` vanishes."""
    return re.sub(r"\{\{|\}\}|\{[^{}]*\}", lambda m: m.group(0)[0] if m.group(0) in ("{{", "}}") else "", s)
