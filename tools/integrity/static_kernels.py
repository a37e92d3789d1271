"""Triton kernel objects and compiled objects, for the allowlist's object rules (`static_objects`):
which names the file binds to them, and which of their attributes and options lead out."""

from __future__ import annotations

import ast

from kiln.tools.integrity import static_rules as R
from kiln.tools.integrity.resolve import Scope
from kiln.tools.integrity.static_keys import _pairs
from kiln.tools.integrity.static_policy import _words

TRITON_OBJECT_ATTRS = _words("""
    fn base_fn get_capture_scope src run warmup cache cache_key asm launch_metadata rewritten_fn rewrite
    preload create_binder device_caches used_global_vals nonlocals globals hasher do_bench prune_configs
    check_disk_cache pre_run_hooks configs_timings early_config_prune perf_model pre_hook post_hook
    user_defined_pre_hook user_defined_post_hook restore_copies make_ir packed_metadata kernel_cache src_map
    ir_override
""")
"""Attributes of Triton's JITFunction, Autotuner, Heuristics, CompiledKernel and ASTSource that lead
to the kernel's function and globals, its launcher, its caches or its callbacks."""

TRITON_OPTIONS = {
    "triton.Config": (5, frozenset({"kwargs", "num_warps", "num_stages", "num_ctas", "maxnreg"})),
    "triton.autotune": (2, frozenset({"configs", "key", "reset_to_zero", "restore_value", "warmup", "rep",
                                      "use_cuda_graph", "cache_results"})),
    "triton.jit": (1, frozenset({"version", "do_not_specialize", "do_not_specialize_on_alignment", "debug",
                                 "noinline"})),
    "triton.heuristics": (1, frozenset()),
}
"""Per Triton entry point: how many positional arguments and which keywords a kernel may pass. Not
the callbacks (`pre_hook`, `post_hook`, `prune_configs_by`, `do_bench`, `repr`, `launch_metadata`)
nor `ir_override`."""


def is_kernel_decorator(node: ast.AST, scope: Scope) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    return any(R.matches(q, R.KERNEL_DECORATORS) for q in scope.resolve(target))


def kernel_names(nodes: list[ast.AST], scope: Scope) -> set[str]:
    """Names bound to Triton kernel objects: decorated defs, and `k = triton.jit(f)` /
    `k = triton.autotune(...)(f)`."""
    names = set()
    for n in nodes:
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                is_kernel_decorator(d, scope) for d in n.decorator_list):
            names.add(n.name)
        elif isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and (
                is_kernel_decorator(n.value, scope) or is_kernel_decorator(n.value.func, scope)):
            names |= {t.id for t in n.targets if isinstance(t, ast.Name)}
    assigns = [n for n in nodes if isinstance(n, ast.Assign)]
    for _ in range(4):  # aliases of aliases
        before = len(names)
        for a in assigns:
            for t in a.targets:
                names |= {k for k, v in _pairs(t, a.value) if _names_kernel(v, names)}
        if len(names) == before:
            break
    return names


def _names_kernel(value: ast.AST, kernels: set[str]) -> bool:
    if isinstance(value, ast.IfExp):
        return _names_kernel(value.body, kernels) or _names_kernel(value.orelse, kernels)
    return isinstance(value, ast.Name) and value.id in kernels


def follow(target: ast.AST, path: list[int]) -> ast.AST | None:
    """The part of an assignment target that a value reached by `path` (tuple indices, innermost
    first) is bound to."""
    for i in reversed(path):
        if not isinstance(target, ast.Tuple | ast.List) or i >= len(target.elts):
            return None
        target = target.elts[i]
    return target


def native_names(nodes: list[ast.AST], scope: Scope) -> set[str]:
    """Names bound to what a compile call returns (`CudaKernel(...)`, `load_inline(...)`)."""
    out = set()
    for n in nodes:
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call):
            f = n.value.func
            called = {q.rsplit(".", 1)[-1] for q in scope.resolve(f)} | {getattr(f, "id", getattr(f, "attr", ""))}
            if called & R.SOURCE_SINKS:
                out |= {t.id for t in n.targets if isinstance(t, ast.Name)}
    return out
