"""kiln's imports go one way: tools <- agents <- graphs <- evals (<- rewards <- the `kiln` front door),
and no module imports itself back through others, lazy imports inside functions included."""

from __future__ import annotations

from pathlib import Path

from tests.core.import_graph import LAYERS, cycles, import_graph, kiln_roots, module_files, wrong_way

REPO = Path(__file__).resolve().parents[2]


def _kiln_graph() -> dict[str, set[str]]:
    files = module_files(kiln_roots(REPO))
    assert len(files) > 200 and "kiln.agents.builtin.lower" in files  # the real tree, every package read
    return import_graph(files)


def test_no_import_cycle_among_kilns_modules() -> None:
    assert cycles(_kiln_graph()) == []


def test_layers_import_one_way() -> None:
    graph = _kiln_graph()
    assert any("kiln.tools.records" in targets for m, targets in graph.items() if m.startswith("kiln.evals."))
    assert wrong_way(graph) == []


def _package(tmp_path: Path, modules: dict[str, str]) -> dict[str, set[str]]:
    root = tmp_path / "pkg"
    for name, text in modules.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return import_graph(module_files({"pkg": root}))


def test_the_checker_finds_top_level_lazy_and_relative_cycles(tmp_path: Path) -> None:
    graph = _package(tmp_path, {
        "__init__.py": "from pkg.a import A\n",
        "a.py": "from pkg.b import B\nA = 1\n",
        "b.py": "def f():\n    from pkg import a  # lazy: still a cycle once f runs\n    return a.A\nB = 2\n",
        "sub/__init__.py": "",
        "sub/c.py": "from . import d\n",
        "sub/d.py": "import pkg.sub.c\n",
        "e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.f import F\n",
        "f.py": "from pkg.e import TYPE_CHECKING as F\n",
        "g.py": "import os\nfrom pkg.sub import c\n",
    })  # fmt: skip
    assert graph["pkg.b"] == {"pkg.a"} and graph["pkg.sub.c"] == {"pkg.sub.d"} and graph["pkg.e"] == set()
    assert cycles(graph) == [["pkg.a", "pkg.b"], ["pkg.sub.c", "pkg.sub.d"]]


def test_the_checker_finds_an_import_that_runs_the_wrong_way(tmp_path: Path) -> None:
    graph = _package(tmp_path, {
        "__init__.py": "", "tools/__init__.py": "", "agents/__init__.py": "",
        "tools/t.py": "def f():\n    from pkg.agents import a\n",
        "agents/a.py": "from pkg.tools import t\n",
    })  # fmt: skip
    assert wrong_way(graph, ("pkg", "pkg.tools", "pkg.agents")) == [("pkg.tools.t", "pkg.agents.a")]
    assert LAYERS[:4] == ("kiln.tools", "kiln.agents", "kiln.graphs", "kiln.evals")
