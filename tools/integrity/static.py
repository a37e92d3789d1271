"""Static integrity scan of a candidate file, on its AST (never on regexes over the text).

`scan_candidate` runs in the parent before any candidate code runs. It resolves aliases and
assembled names (see `resolve.Scope`), applies the rule tables in `static_rules`, and scans every
C/C++/CUDA source string the candidate compiles (see `csource`). Each finding has a rule id, a
severity (`reject`, `warn`, `info`), evidence and a line. docs/integrity.md lists the rules.
"""

from __future__ import annotations

import ast

from kiln.tools import pyparse
from kiln.tools.integrity import static_rules as R
from kiln.tools.integrity.resolve import Scope, dict_owner
from kiln.tools.integrity.static_allow import scan_allowlist
from kiln.tools.integrity.static_objects import scan_objects
from kiln.tools.integrity.static_sources import scan_sources
from kiln.tools.records import Finding, Severity

MODES = ("allowlist", "denylist")
"""`allowlist` (default, for LLM-written code): the denylist rules plus `static_allow`'s allowlist.
`denylist`: the denylist rules only, for hand-written trusted kernels."""


def scan_candidate(source: str, *, filename: str, dtype: str, mode: str = "allowlist") -> list[Finding]:
    """All static findings for one candidate source, sorted by line. A file that does not parse
    gives no findings (the loader reports the syntax error)."""
    if mode not in MODES:
        raise ValueError(f"static scan mode must be one of {', '.join(MODES)} (got {mode!r})")
    try:
        tree = pyparse.parse(source, filename=filename)
    except (SyntaxError, ValueError):
        return []
    scope = Scope(tree)
    visitor = _Visitor(scope, dtype=dtype, filename=filename)
    visitor.visit(tree)
    allow = mode == "allowlist"
    findings = visitor.findings + scan_sources(tree, scope, filename=filename, dtype=dtype,
                                               own_triton=visitor.own_triton, allowlist=allow)
    if allow:
        allow_findings = scan_allowlist(tree, scope, filename=filename) + scan_objects(tree, scope, filename=filename)
        findings += _unexplained(allow_findings, findings)
    return _dedupe(findings)


def _unexplained(allow: list[Finding], deny: list[Finding]) -> list[Finding]:
    """Allowlist findings on lines the denylist rules have not already explained (their rule ids
    and wording say more than "not on the allowlist")."""
    explained = {f.line for f in deny if f.severity == "reject"}
    return [f for f in allow if f.line not in explained]


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: dict[tuple, Finding] = {}
    for f in findings:
        seen.setdefault((f.rule, f.line, f.severity), f)
    return sorted(seen.values(), key=lambda f: (f.line or 0, f.rule))


class _Visitor(ast.NodeVisitor):
    def __init__(self, scope: Scope, *, dtype: str, filename: str) -> None:
        self.scope, self.dtype, self.filename = scope, dtype, filename
        self.findings: list[Finding] = []
        self.depth = 0  # > 0 inside a function body
        self.skip: set[int] = set()  # node ids already judged (an allowed env write)
        self.own_triton = False

    def add(self, rule: str, severity: Severity, evidence: str, node: ast.AST) -> None:
        self.findings.append(Finding(rule=rule, severity=severity, evidence=evidence,
                                     line=getattr(node, "lineno", None), file=self.filename))

    # ------------------------------------------------------------------ structure
    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            if any(R.matches(q, R.KERNEL_DECORATORS) for q in self.scope.resolve(target)):
                self.own_triton = True
        if node.name in ("__torch_function__", "__torch_dispatch__"):
            self.add("static.tensor-subclass", "reject", f"defines {node.name}", node)
        if node.name == "__exit__" and _returns_truthy(node):
            self.add("static.try-except", "reject", "__exit__ returns a true value: it swallows exceptions", node)
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815 - ast.NodeVisitor naming

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            quals = self.scope.resolve(base)
            hit = next((q for q in quals if R.matches(q, R.TENSOR_BASES)), None)
            if hit:
                self.add("static.tensor-subclass", "reject", f"class {node.name} subclasses {hit}", node)
        if node.name == "Model":
            self.add("static.reference-model", "warn", "defines its own class named Model", node)
        if any(isinstance(b, ast.Call) for b in node.bases):
            self.add("static.reference-model", "reject", f"class {node.name} has a base class computed at run time", node)
        self.generic_visit(node)

    def visit_Try(self, node: ast.Try) -> None:
        if node.handlers:
            if self.depth:
                self.add("static.try-except", "reject", "try/except inside a function: a failing kernel "
                         "could fall back to another computation", node)
            elif not _only_imports(node.body):
                self.add("static.try-except", "warn", "module-level try/except around code", node)
            else:
                self.add("static.try-except", "info", "module-level try/except around imports", node)
        self.generic_visit(node)

    visit_TryStar = visit_Try  # type: ignore[assignment]  # noqa: N815

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._check_module(a.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = node.module or ""
        self._check_module(mod, node)
        for a in node.names:
            if a.name == "Model":
                self.add("static.reference-model", "reject", f"imports Model from {mod or '.'}", node)
            self._check_qual(f"{mod}.{a.name}" if mod else a.name, node, called=False)

    def _check_module(self, mod: str, node: ast.AST) -> None:
        if mod == "kiln" or (mod.startswith("kiln.") and not R.matches(mod, R.ALLOWED_KILN)):
            self.add("static.introspection", "reject", f"imports kiln internals ({mod})", node)
        if mod == "builtins":
            self.add("static.introspection", "reject", "imports builtins", node)
        self._check_qual(mod, node, called=False)

    # ------------------------------------------------------------------ expressions
    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            if node.id == "Model":
                sev: Severity = "warn" if "Model" in self.scope.local_classes else "reject"
                self.add("static.reference-model", sev, "uses the name Model (the reference)", node)
            if node.id == "__builtins__":
                self.add("static.introspection", "reject", "uses __builtins__", node)
            self._check_expr(node, called=False)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Load) and id(node) not in self.skip:
            self._check_attr_name(node, called=False)
            self._check_expr(node, called=False)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        from kiln.tools.integrity.static_calls import check_call

        check_call(self, node)
        if isinstance(node.func, ast.Attribute):
            self._check_attr_name(node.func, called=True)
            self.skip.add(id(node.func))
        self._check_expr(node.func, called=True)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        owners = dict_owner(node.value, self.scope)
        if owners and any(q.startswith("torch") for q in owners):
            self.add("static.dynamic-torch-attr", "reject", "reads torch through its __dict__ / vars()", node)
        if isinstance(node.ctx, ast.Load):
            self._check_expr(node, called=False)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if node.value in R.HARNESS_NAMES:
            self.add("static.reference-model", "reject", f"looks up the harness's {node.value!r} by name", node)
        if isinstance(node.value, str):
            self.check_name_string(node.value, node)

    def check_name_string(self, text: str, node: ast.AST) -> None:
        """A string naming a dangerous attribute ('Stream', 'cuda.Stream', '_getframe') is on its way
        to a getattr / attrgetter whatever object it is applied to."""
        last = text.rsplit(".", 1)[-1]
        if last in R.STREAM_ATTRS:
            self.add("static.stream", "reject", f"names a stream API in a string: {text!r}", node)
        if last in R.INTROSPECTION_ATTRS:
            self.add("static.introspection", "reject", f"names frame/code internals in a string: {text!r}", node)

    # ------------------------------------------------------------------ stores
    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._check_store(t)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_store(node.target)
        self.generic_visit(node)

    visit_AnnAssign = visit_AugAssign  # type: ignore[assignment]  # noqa: N815

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self._check_store(t)
        self.generic_visit(node)

    def _check_store(self, target: ast.AST) -> None:
        from kiln.tools.integrity.static_calls import check_store

        check_store(self, target)

    # ------------------------------------------------------------------ shared checks
    def _check_expr(self, node: ast.AST, *, called: bool) -> None:
        for q in self.scope.resolve(node):
            self._check_qual(q, node, called=called)

    def _check_qual(self, q: str, node: ast.AST, *, called: bool) -> None:
        table: list[tuple[tuple[str, ...], str, Severity, str]] = [
            (R.THREADS, "static.threads", "reject", "threads, processes or executors"),
            (R.STREAM, "static.stream", "reject", "creates or switches CUDA streams"),
            (R.INTROSPECTION, "static.introspection", "reject", "introspection of the caller or the process"),
            (R.ENV_OR_FILE, "static.env-or-file", "reject", "reads the environment, files or the network"),
            (R.CLOCK, "static.introspection", "warn", "reads clocks or timing utilities"),
            (R.NATIVE, "static.introspection", "warn", "raw native calls kiln cannot inspect"),
            (R.DYNAMIC, "static.dynamic-torch-attr", "warn", "dynamic attribute access"),
        ]
        if called:
            table.append((R.GLOBAL_STATE_CALLS, "static.monkey-patch", "reject", "changes process-wide torch state"))
            table.append((R.PATCH_CALLS[-2:], "static.monkey-patch", "reject", "mock patching"))
        for prefixes, rule, sev, what in table:
            hit = R.matches(q, prefixes)
            if hit:
                self.add(rule, sev, f"{what}: {q}", node)

    def _check_attr_name(self, node: ast.Attribute, *, called: bool) -> None:
        a = node.attr
        if a in R.INTROSPECTION_ATTRS:
            self.add("static.introspection", "reject", f"frame or code introspection: .{a}", node)
        if a in R.STREAM_ATTRS or (called and a in R.STREAM_CALLED_ATTRS):
            self.add("static.stream", "reject", f"creates or switches CUDA streams: .{a}", node)
        if a in R.SUBCLASS_ATTRS:
            self.add("static.tensor-subclass", "reject", f"tensor subclass machinery: .{a}", node)
        if a in R.DOWNCAST_ATTRS and self.dtype == "fp32":
            self.add("static.downcast", "warn", f"lower precision in an fp32 problem: .{a}", node)


def _only_imports(body: list[ast.stmt]) -> bool:
    return all(isinstance(s, (ast.Import, ast.ImportFrom, ast.Pass)) or
               (isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant)) for s in body)


def _returns_truthy(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for n in ast.walk(fn):
        if isinstance(n, ast.Return) and n.value is not None and not (
            isinstance(n.value, ast.Constant) and not n.value.value
        ):
            return True
    return False
