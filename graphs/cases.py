"""Validation of Proposer cases against the reference, before any candidate sees them: same
`Model` as the problem (only init inputs and `get_inputs` may differ), loads, runs in its own
process within the time limit, returns tensors."""

from __future__ import annotations

import ast
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from kiln.agents.base import StressCase as ProposedCase
from kiln.graphs import rundir
from kiln.graphs.context import RunContext
from kiln.graphs.state import StressCase
from kiln.tools import pyparse

_REQUIRED = ("Model", "get_inputs", "get_init_inputs")


def _model_class(tree: ast.Module) -> str | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            return ast.dump(node, include_attributes=False)
    return None


def static_problem(source: str, problem_src: str) -> str | None:
    """Why the case is not a valid variant of the problem, or None."""
    try:
        tree = pyparse.parse(source)
    except SyntaxError as err:
        return f"syntax error at line {err.lineno}: {err.msg}"
    names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    missing = [n for n in _REQUIRED if n not in names]
    if missing:
        return f"missing {', '.join(missing)}"
    if _model_class(tree) != _model_class(pyparse.parse(problem_src)):
        return "its Model differs from the problem's Model (only init inputs and get_inputs may change)"
    return None


def _env() -> dict[str, str]:
    secret = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)
    env = {k: v for k, v in os.environ.items() if not secret.search(k)}
    env.pop("TRITON_INTERPRET", None)
    return env


def run_reference(case: Path, device: str, timeout_s: float) -> str | None:
    """Run the case's reference once in a fresh process group; why it failed, or None."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        argv = [sys.executable, "-m", "kiln.graphs.case_runner", str(case), str(out), device]
        proc = subprocess.Popen(argv, env=_env(), cwd=tmp, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return f"too slow: the reference took over {timeout_s:.0f} s"
        if not out.exists():
            return f"the reference process died (exit {proc.returncode}): {err.strip()[-300:]}"
        result = json.loads(out.read_text())
    return None if result["ok"] else f"the reference fails on it: {result['error']}"


def safe_name(name: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_")[:48] or "case"
    base = base if base[0].isalpha() else f"case_{base}"
    out, i = base, 2
    while out in taken or out == "problem":
        out, i = f"{base}_{i}", i + 1
    return out


def validate(ctx: RunContext, case: ProposedCase, taken: set[str], round_: int) -> StressCase:
    """Write the case into the run dir and validate it against the reference."""
    name = safe_name(case.name, taken)
    rel = f"cases/{name}.py"
    path = rundir.write(ctx.run_dir, rel, case.source)
    why = static_problem(case.source, ctx.problem.read_text())
    if why is None:
        why = run_reference(path, ctx.options.device, ctx.options.case_timeout_s)
    rundir.event(ctx.run_dir, "case", name=name, valid=why is None, reason=why or "ok")
    return StressCase(name=name, path=rel, valid=why is None, reason=why or "ok", rationale=case.rationale,
                      round=round_)
