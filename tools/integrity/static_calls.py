"""Call and store rules of the static scan (helpers of `static._Visitor`)."""

from __future__ import annotations

import ast
from typing import Any

from kiln.tools.integrity import static_rules as R
from kiln.tools.integrity.resolve import dict_owner

_ENV_WRITERS = frozenset({"setdefault", "update", "__setitem__"})


def check_call(v: Any, node: ast.Call) -> None:
    funcs = v.scope.resolve(node.func)
    if "builtins.getattr" in funcs and len(node.args) >= 2:
        _check_getattr(v, node)
    if funcs & {"builtins.setattr", "builtins.delattr", "builtins.object.__setattr__",
                "builtins.type.__setattr__"} and node.args:
        owner = v.scope.resolve(node.args[0])
        if owner:
            v.add("static.monkey-patch", "reject", f"setattr on {sorted(owner)[0]}", node)
    if any(R.matches(q, ("contextlib.suppress",)) for q in funcs):
        v.add("static.try-except", "reject", "contextlib.suppress swallows exceptions", node)
    if v.dtype == "fp32" and "triton.language.dot" in funcs:
        _check_tl_dot(v, node)
    _check_env_write_call(v, node)


def _check_getattr(v: Any, node: ast.Call) -> None:
    owners = v.scope.resolve(node.args[0])
    name = v.scope.fold(node.args[1])
    if name is not None and not isinstance(node.args[1], ast.Constant):
        v.check_name_string(name, node)  # an assembled attribute name, whatever the object
    if not any(q == "torch" or q.startswith("torch.") for q in owners):
        return
    if name is None:
        v.add("static.dynamic-torch-attr", "reject", "getattr on torch with a computed name", node)
    elif not isinstance(node.args[1], ast.Constant):
        v.add("static.dynamic-torch-attr", "reject", f"getattr on torch with an assembled name ({name!r})", node)
    else:
        v.add("static.dynamic-torch-attr", "warn", f"getattr on torch with a literal name ({name!r})", node)
    for q in owners:
        v._check_qual(f"{q}.{name}", node, called=True) if name else None


def _check_tl_dot(v: Any, node: ast.Call) -> None:
    kw = {k.arg: k.value for k in node.keywords if k.arg}
    prec = v.scope.fold(kw.get("input_precision"))
    tf32 = kw.get("allow_tf32")
    if prec in ("tf32", "bf16", "fp16") or (isinstance(tf32, ast.Constant) and tf32.value is True):
        v.add("static.downcast", "warn", "tl.dot uses reduced input precision (TF32)", node)
    elif prec is None and tf32 is None:
        v.add("static.downcast", "warn", "tl.dot on fp32 inputs defaults to TF32 (pass input_precision='ieee')", node)


def _check_env_write_call(v: Any, node: ast.Call) -> None:
    f = node.func
    if not (isinstance(f, ast.Attribute) and f.attr in _ENV_WRITERS):
        return
    if "os.environ" not in v.scope.resolve(f.value):
        return
    key = v.scope.fold(node.args[0]) if node.args else None
    _env_write(v, key, node)
    v.skip.add(id(f.value))
    v.skip.add(id(f))


def _env_write(v: Any, key: str | None, node: ast.AST) -> None:
    if key in R.ENV_WRITE_OK and v.depth == 0:
        v.add("static.env-or-file", "warn", f"sets the build setting {key} in the environment", node)
    else:
        v.add("static.env-or-file", "reject", f"writes the environment variable {key or '<computed>'}", node)


def check_store(v: Any, target: ast.AST) -> None:
    if isinstance(target, (ast.Tuple, ast.List)):
        for t in target.elts:
            check_store(v, t)
        return
    if isinstance(target, ast.Subscript):
        _check_subscript_store(v, target)
    elif isinstance(target, ast.Attribute):
        owners = v.scope.resolve(target.value)
        if owners:
            v.add("static.monkey-patch", "reject", f"assigns {sorted(owners)[0]}.{target.attr}", target)


def _check_subscript_store(v: Any, target: ast.Subscript) -> None:
    owners = v.scope.resolve(target.value)
    if "os.environ" in owners:
        _env_write(v, v.scope.fold(target.slice), target)
        v.skip.add(id(target.value))
        return
    if dict_owner(target.value, v.scope):
        v.add("static.monkey-patch", "reject", "writes a module's __dict__ / vars()", target)
    elif owners & {"sys.modules"}:
        v.add("static.introspection", "reject", "writes sys.modules", target)
    elif isinstance(target.value, ast.Call) and v.scope.resolve(target.value.func) & {"builtins.globals"}:
        v.add("static.introspection", "reject", "writes globals()", target)
