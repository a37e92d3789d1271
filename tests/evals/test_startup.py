"""Start-up (issue 26, item 2): `kiln --version`, `--help` and a bad input load no heavy library
(torch, LangGraph, LangChain); the command table's one-line helps and the loop flags' defaults are
the commands' and the models' own; `--help` wraps at the terminal's width, not into narrow columns.
The times themselves are benchmarks (bench/cli_startup.py, bench/RESULTS.md), never asserted here."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FIX = Path(__file__).parents[1] / "fixtures"
PROBLEM = FIX / "problems" / "relu.py"
HEAVY = ("torch", "triton", "langgraph", "langchain_core", "langsmith", "numpy")
PROBE = """
import json, sys
from kiln.evals.cli import main
sys.argv = ["kiln", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit as done:
    code = done.code
print(json.dumps({{"code": code, "loaded": sorted(m for m in sys.modules if m.split(".")[0] in {!r})}}))
""".format(HEAVY + ("pydantic",))


def loaded(*argv: str, cwd: Path | None = None) -> tuple[int, set[str], str]:
    """(exit code, heavy top-level modules imported, stderr) of `kiln ARGV` run in a fresh process."""
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env={**os.environ, "COLUMNS": "80"})
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return out["code"], {m.split(".")[0] for m in out["loaded"]}, done.stderr


def test_version_and_help_import_nothing_heavy() -> None:
    for argv in (["--version"], ["--help"]):
        code, mods, _ = loaded(*argv)
        assert code == 0 and not mods, (argv, mods)  # not even pydantic
    code, mods, err = loaded("rn")  # typer's usage-error path imports pydantic itself
    assert code == 2 and "Did you mean 'run'?" in err and not mods - {"pydantic"}


@pytest.mark.parametrize("cmd", ["run", "eval", "report", "check", "model", "ui", "profile", "doctor", "curriculum"])
def test_command_help_imports_no_torch_or_langchain(cmd: str) -> None:
    code, mods, _ = loaded(cmd, "--help")
    assert code == 0 and not mods - {"pydantic"}, mods


def test_bad_input_fails_before_heavy_imports(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    cases = {
        ("run", "missing.py"): "problem file not found",
        ("run", str(PROBLEM), "--out", "/proc/1/x"): "--out /proc/1/x: cannot write there",
        ("run", str(PROBLEM), "--out", str(afile / "sub")): "is a file, not a folder",
        ("run", str(PROBLEM), "--max-iters", "0"): "--max-iters must be >= 1 (got 0)",
        ("run", str(PROBLEM), "--device", "gpu"): "--device must be one of auto, cuda, cpu",
        ("run", "--resume", str(tmp_path)): "not a kiln run directory",
        ("eval", str(tmp_path / "none")): "no such file or folder",
        ("eval", str(PROBLEM), "--out", "/proc/1/x"): "--out /proc/1/x: cannot write there",
        ("report", str(tmp_path)): "is not a kiln eval run",
    }
    for argv, words in cases.items():
        code, mods, err = loaded(*argv, cwd=tmp_path)
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, (argv, err)
        assert not mods - {"pydantic"}, (argv, mods)
    assert not (tmp_path / "runs").exists()  # no run directory left behind by a refused run


def test_the_command_table_matches_each_commands_docstring() -> None:
    from kiln.evals.cli import COMMANDS

    for name, (target, short) in COMMANDS.items():
        module, func = target.split(":")
        doc = getattr(importlib.import_module(module), func).__doc__
        assert " ".join(doc.split("\n\n")[0].split()) == short, name


def test_loop_flag_defaults_are_the_models() -> None:
    from kiln.graphs import cli_options as o

    for const, (target, field) in o.DEFAULTS.items():
        module, cls = target.split(":")
        model = getattr(importlib.import_module(module), cls)
        assert getattr(o, const) == model.model_fields[field].default, const


def test_help_uses_the_terminal_width() -> None:
    """At 80 columns each flag's description starts by column 34: 46 columns of text, not 20."""
    out = subprocess.run([sys.executable, "-m", "kiln.evals.cli", "run", "--help"], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "COLUMNS": "80"}).stdout
    lines = [ln for ln in out.splitlines() if ln.startswith("  --") and "  " in ln.strip()]
    assert len(lines) > 10 and all(len(ln) <= 80 for ln in out.splitlines())
    starts = [len(ln) - len(ln.lstrip()[ln.lstrip().index("  "):].lstrip()) for ln in lines]
    assert max(starts) <= 34, max(starts)
    assert "stop once the speedup's 95% CI low end reaches this" in " ".join(out.split())
