"""The install (issue 26, item 1): `make demo` installs kiln's base dependencies only, `make test`
everything the suite needs (extras, Chromium, bubblewrap); the main job's code imports nothing
outside the base dependencies; pyproject.toml gives setuptools no deprecation warning."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
# what only the tests, the dashboard, model mode's library targets, RL, Ray or the profiler use
NOT_MAIN_JOB = {"pytest", "pytest-timeout", "pytest-xdist", "ruff", "mypy", "playwright", "starlette", "uvicorn",
                "trl", "datasets", "transformers", "diffusers", "timm", "ray", "langchain-anthropic", "ncu-report",
                "nvtx", "langchain"}


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0].strip().lower().replace("_", "-")


def _dry_run(target: str, tmp_path: Path) -> list[str]:
    done = subprocess.run(["make", "-n", target, f"VENV={tmp_path / 'venv'}"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # under a parent make (CI runs `make test`), make -n also prints "make[1]: Entering directory ..."
    return [ln for ln in done.stdout.splitlines() if not re.match(r"make(\[\d+\])?: ", ln)]


def test_make_demo_installs_the_base_dependencies_only(tmp_path: Path) -> None:
    demo = _dry_run("demo", tmp_path)
    installs = [ln for ln in demo if "pip install" in ln]
    assert installs and all("[" not in ln for ln in installs), installs
    assert any(re.search(r"pip install -q torch\S* -e \.$", ln.rstrip()) for ln in installs), installs
    assert not any("apt-get" in ln or "playwright" in ln for ln in demo)
    assert demo[-1].endswith("kiln run examples/softmax.py")


def test_make_test_installs_everything_the_suite_needs(tmp_path: Path) -> None:
    lines = " ".join(_dry_run("test", tmp_path))
    extras = re.search(r"pip install -q -e '\.\[([a-z,]+)\]'", lines)
    assert extras, lines
    assert set(extras[1].split(",")) >= {"dev", "ray", "anthropic", "profile"}
    assert "chromium" in lines and "bubblewrap" in lines and "pytest" in lines


def test_base_dependencies_leave_out_what_only_tests_and_extras_need() -> None:
    base = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    assert not base & NOT_MAIN_JOB, base & NOT_MAIN_JOB
    assert {"torch", "triton", "langgraph", "langchain-openai", "pydantic", "typer"} <= base


def _closure(names: set[str]) -> set[str]:
    """Distributions these need, transitively (as installed here)."""
    todo, seen = list(names), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [_name(r) for r in reqs if "extra ==" not in r]
    return seen


MAIN_JOB_IMPORTS = """
import json, sys

class Hide:  # as if these distributions were not installed
    hidden = set(json.loads(sys.argv[1]))

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.hidden:
            raise ModuleNotFoundError(f"No module named {name!r} (hidden: not a base dependency)", name=name)
        return None

sys.meta_path.insert(0, Hide())
import kiln.graphs.runner, kiln.graphs.graph, kiln.agents.builtin, kiln.agents.registry, kiln.evals.cli
import kiln.tools.check.api, kiln.tools.check.worker, kiln.tools.check.session, kiln.tools.integrity.static
import kiln.graphs.progress, kiln.tools.render
from kiln.agents.registry import resolve_roles
from kiln.graphs.graph import build_graph
build_graph()
resolve_roles(None)
print("imported")
"""


def test_the_main_job_needs_only_base_dependencies() -> None:
    """Its modules import with every other installed distribution hidden."""
    allowed = _closure({_name(r) for r in PYPROJECT["project"]["dependencies"]}) | {"kernelkiln"}
    hidden = sorted(m for m, dists in metadata.packages_distributions().items()
                    if not {_name(d) for d in dists} & allowed and not m.startswith("_"))
    assert {"starlette", "playwright", "trl", "pytest"} <= set(hidden)
    out = subprocess.run([sys.executable, "-c", MAIN_JOB_IMPORTS, json.dumps(hidden)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("imported"), out.stderr[-2000:]


def test_pyproject_gives_setuptools_no_deprecation_warning() -> None:
    code = ("import warnings\nwarnings.simplefilter('error')\n"
            "from setuptools.dist import Distribution\n"
            "from setuptools.config.pyprojecttoml import apply_configuration\n"
            "apply_configuration(Distribution(), 'pyproject.toml')\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "Warning" not in done.stderr, done.stderr[-1500:]
