"""The import graph of kiln's modules, read from source with `ast` (nothing is imported).

Every `import` and `from ... import` that can run counts, at module level or inside a function (a
lazy import still closes a cycle the moment it runs); imports under `if TYPE_CHECKING:` never run
and do not count (`import_graph(files, type_checking=True)` gives those edges). An edge goes to the module named; `from pkg import name` goes to `pkg.name`
when that is a module, else to `pkg` itself. Importing a module also runs its parents'
`__init__`, but that edge is not drawn: a package's `__init__` re-exporting its own submodules is
not a cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path


def module_files(roots: Mapping[str, Path]) -> dict[str, Path]:
    """Module name -> file for every `.py` under each package root (`{"kiln.tools": repo/"tools"}`)."""
    files: dict[str, Path] = {}
    for package, root in roots.items():
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            files[".".join((package, *parts))] = path
    return files


def _imported(node: ast.AST, module: str, is_package: bool) -> Iterable[str]:
    """The names one import statement asks for: `a.b` for `import a.b`, `pkg` and `pkg.name`
    candidates for `from pkg import name` (relative imports resolved against `module`)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            anchor = module.split(".")
            anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
            base = ".".join(anchor + ([base] if base else []))
        yield base
        yield from (f"{base}.{alias.name}" for alias in node.names)


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return isinstance(test, ast.Name | ast.Attribute) and ast.unparse(test).endswith("TYPE_CHECKING")


def _imports(tree: ast.AST, type_checking: bool) -> Iterable[ast.Import | ast.ImportFrom]:
    """The import statements that run (type_checking=False), or only those under `if TYPE_CHECKING:`."""
    todo: list[tuple[ast.AST, bool]] = [(tree, False)]
    while todo:
        node, guarded = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom) and guarded == type_checking:
            yield node
        if _is_type_checking(node):
            assert isinstance(node, ast.If)
            todo += [(n, True) for n in node.body] + [(n, guarded) for n in node.orelse]
        else:
            todo += [(n, guarded) for n in ast.iter_child_nodes(node)]


def import_graph(files: Mapping[str, Path], *, type_checking: bool = False) -> dict[str, set[str]]:
    """Module -> the modules among `files` it imports, at the top or lazily (`type_checking`: the edges of
    `if TYPE_CHECKING:` imports instead)."""
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in _imports(ast.parse(path.read_text(), filename=str(path)), type_checking):
            names = list(_imported(node, module, is_package))
            if isinstance(node, ast.ImportFrom):
                base, members = names[0], names[1:]
                found = [m for m in members if m in files]
                edges.update(found if len(found) == len(members) else [*found, base])
            else:
                edges.update(names)
        graph[module] = {target for target in edges if target in files and target != module}
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def kiln_roots(repo: Path) -> dict[str, Path]:
    """kiln's packages as setup.py installs them: `kiln/` and each top-level code folder."""
    roots = {"kiln": repo / "kiln"}
    for layer in ("tools", "agents", "graphs", "evals", "rewards"):
        roots[f"kiln.{layer}"] = repo / layer
    return roots


LAYERS = ("kiln.tools", "kiln.agents", "kiln.graphs", "kiln.evals", "kiln.rewards", "kiln")


def layer_of(module: str, layers: tuple[str, ...] = LAYERS) -> int:
    """The index of the longest layer prefix of `module` (imports may only go to a lower index)."""
    hits = [i for i, layer in enumerate(layers) if module == layer or module.startswith(layer + ".")]
    return max(hits, key=lambda i: len(layers[i]))


def wrong_way(graph: Mapping[str, set[str]], layers: tuple[str, ...] = LAYERS) -> list[tuple[str, str]]:
    """Every edge from a lower layer to a higher one (`kiln.tools.x` importing `kiln.agents.y`)."""
    return sorted((a, b) for a, targets in graph.items() for b in targets if layer_of(b, layers) > layer_of(a, layers))
