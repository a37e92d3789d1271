"""The allowlist's rules on objects (issue 22, part 5): what a candidate may do with the objects it
holds, not only with modules.

- **Triton kernels** (names bound by `@triton.jit` / `@triton.autotune` / `@triton.heuristics`, or
  `k = triton.jit(f)`): only the launch, `k[grid](...)` as a statement. No attribute (`k.fn`,
  `k.run`, `k.cache`, `k.src`, `k.get_capture_scope()`, ...: they lead to the module's globals and
  `exec`), no passing `k` around, no keeping the launch's result (a compiled kernel with the same
  ways out). Inside a kernel body a kernel may be called or handed to `tl.*` (a combine function).
  Attribute names of Triton's kernel objects are refused on any object the file did not define
  them on, so `def g(f): return f.fn` fails whatever `f` is (`g(tl.sum)`).
- **Private attributes on any object**: `x._name` only where the file defines `_name` itself (on
  `self` or in a class body) and it is not a name nn.Module, autograd, tensors or Triton use
  (`static_names.RESERVED_PRIVATE`); namedtuple's `_replace`/`_asdict`/`_fields`/`_make`.
  Dunders are `static_allow`'s; here `__init__` must be called on `super()` or a base class.
- **Keys** (`static_keys`): a subscript, `.get/.pop/.setdefault`, a `match` mapping or class
  pattern, a `str.format` field that reaches a dunder or private name, and a key built at run
  time that the scan can't fold, on anything but a container the file built.
- **Triton callbacks**: `pre_hook=`, `post_hook=`, `prune_configs_by=`, `do_bench=`, `repr=`,
  `launch_metadata=`, `ir_override=` (Python run at launch or tuning time, or IR from elsewhere).
- **Compiled objects** (`CudaKernel(...)`, `load_inline(...)` results): no attribute stores
  (`K.source = ...` would run a source the scan never read).
"""

from __future__ import annotations

import ast

from kiln.tools.integrity import static_rules as R
from kiln.tools.integrity.resolve import Scope
from kiln.tools.integrity.static_allow import AllowlistVisitor, _is_dunder
from kiln.tools.integrity.static_classes import class_facts, scan_classes
from kiln.tools.integrity.static_kernels import (
    TRITON_OBJECT_ATTRS,
    TRITON_OPTIONS,
    follow,
    is_kernel_decorator,
    kernel_names,
    native_names,
)
from kiln.tools.integrity.static_keys import Keys, format_fields, is_private
from kiln.tools.integrity.static_names import RESERVED_PRIVATE
from kiln.tools.integrity.static_policy import ALLOWED_DUNDER_ATTRS, REFUSED_METHODS, _words
from kiln.tools.records import Finding

FUNCTION_HANDLES = _words("fget fset fdel func")
"""Attributes that hand out a raw function (a property's getter, a partial's or cached_property's
function): called with another object as `self`, it reaches that object under the class's names."""

NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults"})
_KEY_METHODS = frozenset({"get", "pop", "setdefault"})
_NAMED_ACCESS = frozenset({"builtins.getattr", "builtins.setattr", "builtins.delattr", "builtins.hasattr"})
_RULE = "static.dynamic-access"
_KERNEL = "static.kernel-object"


def scan_objects(tree: ast.Module, scope: Scope, *, filename: str) -> list[Finding]:
    v = _ObjectVisitor(tree, scope, filename)
    v.visit(tree)
    return v.findings


class _ObjectVisitor(AllowlistVisitor):
    def __init__(self, tree: ast.Module, scope: Scope, filename: str) -> None:
        super().__init__(filename)
        self.scope = scope
        nodes = list(ast.walk(tree))
        self.parents = {id(c): p for p in nodes for c in ast.iter_child_nodes(p)}
        self.keys = Keys(nodes, scope)
        self.kernels = kernel_names(nodes, scope)
        self.native = native_names(nodes, scope)
        self.classes = class_facts(nodes)
        self.frames: list[ast.AST] = []  # enclosing functions and lambdas, innermost last
        self.jit_depth = 0
        self.findings += scan_classes(nodes, scope, self.classes, self.parents, filename=filename)

    # ------------------------------------------------------------------ structure
    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._check_definition(node.name, node)
        jit = any(is_kernel_decorator(d, self.scope) for d in node.decorator_list)
        self.jit_depth += jit
        self.visit_Lambda(node)  # type: ignore[arg-type]
        self.jit_depth -= jit

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815 - ast.NodeVisitor naming

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for item in node.body:
            targets = item.targets if isinstance(item, ast.Assign) else [item.target] if isinstance(
                item, ast.AnnAssign) else []
            for t in targets:
                if isinstance(t, ast.Name):
                    self._check_definition(t.id, t)
        self.generic_visit(node)

    def _check_definition(self, name: str, node: ast.AST) -> None:
        """A class may not define what nn.Module, autograd or Triton keep under that name
        (`def _call_impl(self, ...)` would run in place of nn.Module's call machinery)."""
        if name in RESERVED_PRIVATE and isinstance(self.parents.get(id(node)), ast.ClassDef | ast.Assign |
                                                    ast.AnnAssign):
            self.add(_RULE, f"defines {name}, a private name of nn.Module, autograd, tensors or Triton", node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.frames.append(node)
        self.generic_visit(node)
        self.frames.pop()

    def _on_own_self(self, base: ast.AST | None) -> bool:
        """Is `base` the `self` of the innermost enclosing method (one that never rebinds it)?"""
        method = next((f for f in reversed(self.frames) if id(f) in self.classes.self_of), None)
        return method is not None and isinstance(base, ast.Name) and base.id == self.classes.self_of[id(method)]

    # ------------------------------------------------------------------ kernels
    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.kernels and isinstance(node.ctx, ast.Load) and not self._kernel_use_ok(node):
            self.add(_KERNEL, f"uses the Triton kernel {node.id} other than to launch it ({node.id}[grid](...) as a "
                     "statement): a kernel object's attributes lead to its globals, its launcher and its caches", node)

    def _kernel_use_ok(self, node: ast.Name) -> bool:
        p = self.parents.get(id(node))
        if isinstance(p, ast.Subscript) and p.value is node:
            call = self.parents.get(id(p))
            return isinstance(call, ast.Call) and call.func is p and isinstance(self.parents.get(id(call)), ast.Expr)
        if self._is_alias_value(node):
            return True  # `kernel, block = _k_onepass, 1024`: the alias is a kernel name, checked the same way
        if not isinstance(p, ast.Call) or p.func is node and not self.jit_depth:
            return False
        if p.func is node:
            return True  # a device function called from a kernel body
        if is_kernel_decorator(p.func, self.scope) or is_kernel_decorator(p, self.scope):
            return True  # triton.autotune(...)(k)
        return bool(self.jit_depth) and (any(q.startswith("triton.language.") for q in self.scope.resolve(p.func))
                                         or (isinstance(p.func, ast.Name) and p.func.id in self.kernels))

    def _is_alias_value(self, node: ast.AST) -> bool:
        """Is `node` (through conditional expressions and tuple displays) what an assignment binds to
        a plain name?"""
        child, p = node, self.parents.get(id(node))
        path: list[int] = []
        while isinstance(p, ast.IfExp | ast.Tuple) and (not isinstance(p, ast.IfExp) or child is not p.test):
            if isinstance(p, ast.Tuple):
                path.append(p.elts.index(child))  # type: ignore[arg-type]
            child, p = p, self.parents.get(id(p))
        if not isinstance(p, ast.Assign) or p.value is not child or isinstance(self.parents.get(id(p)), ast.ClassDef):
            return False  # not a class attribute: `A.kern` is not followed
        return all(isinstance(follow(t, path), ast.Name) for t in p.targets)

    # ------------------------------------------------------------------ attributes
    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr == "__init__":
            self._check_init(node)
        elif not self.scope.resolve(node.value):  # names rooted in a module: static_allow.refusal speaks
            self._check_attr_name(node.attr, node, node.value)
        if not isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name) and node.value.id in self.native:
            self.add("static.monkey-patch", f"rebinds {node.value.id}.{node.attr} on a compiled kernel object: "
                     "what runs must be the source kiln scanned", node)
        self.generic_visit(node)

    def _check_attr_name(self, attr: str, node: ast.AST, base: ast.AST | None) -> None:
        """The attribute rules that hold on any object (also for getattr literals and match patterns).
        Only a method's own `self` may reach a private or Triton-named attribute its class defines."""
        own = attr in self.classes.own and self._on_own_self(base)
        if attr in R.INTROSPECTION_ATTRS or (_is_dunder(attr) and attr not in ALLOWED_DUNDER_ATTRS):
            if not isinstance(node, ast.Attribute):  # static_allow / static speak for .attr
                self.add(_RULE, f"reaches the special attribute {attr}", node)
        elif attr.startswith("_") and not _is_dunder(attr) and attr not in NAMEDTUPLE_API and not (
                own and attr not in RESERVED_PRIVATE):
            self.add(_RULE, f"reaches the private attribute .{attr} of an object the file did not define it on"
                     + (" (an attribute of nn.Module, autograd, tensors or Triton)" if attr in RESERVED_PRIVATE else ""),
                     node)
        elif attr in FUNCTION_HANDLES and not own:
            self.add(_RULE, f".{attr} hands out the raw function of a property or partial, callable with any self",
                     node)
        elif attr in TRITON_OBJECT_ATTRS and not own:
            self.add(_KERNEL, f"reaches .{attr}, an attribute of Triton's kernel objects (their function, globals, "
                     "launcher, caches or callbacks)", node)
        elif "hook" in attr.lower() and not own and attr not in REFUSED_METHODS:  # those: static_allow
            self.add(_RULE, f".{attr}: hooks run code where kiln's accounting does not look; no kernel needs one", node)

    def _check_init(self, node: ast.Attribute) -> None:
        call = self.parents.get(id(node))
        base = node.value
        on_base = (isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super") or \
            bool(self.scope.resolve(base)) or (isinstance(base, ast.Name) and base.id in self.classes.names)
        on_self = isinstance(call, ast.Call) and (not isinstance(base, ast.Name) or bool(call.args) and
                                                  self._on_own_self(call.args[0]))  # Base.__init__(self, ...)
        if not (isinstance(call, ast.Call) and call.func is node and on_base and on_self):
            self.add(_RULE, "__init__ other than called on super() or a base class (it re-initialises an object "
                     "kiln or Triton built)", node)

    # ------------------------------------------------------------------ keys
    def visit_Subscript(self, node: ast.Subscript) -> None:
        self._check_key(node.slice, node.value, node)
        self.generic_visit(node)

    def _check_key(self, key: ast.AST, obj: ast.AST, node: ast.AST) -> None:
        kind = self.keys.key_kind(key)
        if kind == "private":
            self.add(_RULE, f"looks up the key {self.scope.fold(key) or '<a dunder or private name>'!r}: a namespace "
                     "look-up (globals, builtins, a __dict__)", node)
        elif kind == "opaque" and not self.keys.is_container(obj):
            self.add(_RULE, "looks up a key built at run time that the scan can't read, on an object the file did "
                     "not build (a namespace look-up by an assembled name)", node)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in _KEY_METHODS and node.args:
            self._check_key(node.args[0], f.value, node)
        if isinstance(f, ast.Attribute) and f.attr in ("format", "format_map"):
            self._check_format(node)
        funcs = self.scope.resolve(f)
        if funcs & _NAMED_ACCESS and len(node.args) >= 2:
            self._check_named_access(node, funcs)
        for q in funcs:
            if q in TRITON_OPTIONS:
                self._check_triton_options(node, q)
        self.generic_visit(node)

    def _check_named_access(self, node: ast.Call, funcs: set[str]) -> None:
        name = self.scope.fold(node.args[1]) if isinstance(node.args[1], ast.Constant) else None
        target = node.args[0]
        if name is not None and not self.scope.resolve(target):
            self._check_attr_name(name, node, target)
        native = isinstance(target, ast.Name) and target.id in self.native
        if native and isinstance(target, ast.Name) and funcs & {"builtins.setattr", "builtins.delattr"}:
            self.add("static.monkey-patch", f"setattr on {target.id}, a compiled kernel object", node)

    def _check_format(self, node: ast.Call) -> None:
        f = node.func
        assert isinstance(f, ast.Attribute)
        recv = node.args[0] if isinstance(f.value, ast.Name) and f.value.id == "str" and node.args else f.value
        template = self.scope.fold(recv) if self.keys.exact(recv) else None
        if template is None:
            self.add(_RULE, f"str.{f.attr} with a template built at run time: its fields can reach any attribute",
                     node)
            return
        for part in format_fields(template):
            if is_private(part) or part in R.INTROSPECTION_ATTRS or part in TRITON_OBJECT_ATTRS:
                self.add(_RULE, f"a format template reaches {part!r}: format fields walk attributes and keys", node)

    def _check_triton_options(self, node: ast.Call, q: str) -> None:
        most, ok = TRITON_OPTIONS[q]
        bad = [k.arg or "**" for k in node.keywords if k.arg not in ok]
        if len(node.args) > most or any(isinstance(a, ast.Starred) for a in node.args):
            bad.append("a positional callback")
        if bad:
            self.add(_RULE, f"{q}({', '.join(sorted(set(bad)))}=...): Triton runs such callbacks at launch or tuning "
                     "time, where kiln's accounting does not look (or reads IR kiln never saw)", node)

    # ------------------------------------------------------------------ match statements
    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        for attr in node.kwd_attrs:
            self._check_attr_name(attr, node, None)
        self.generic_visit(node)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        for key in node.keys:
            if self.keys.key_kind(key) == "private":
                self.add(_RULE, f"a match pattern looks up the key {self.scope.fold(key)!r}", node)
        self.generic_visit(node)
