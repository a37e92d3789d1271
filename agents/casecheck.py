"""Checks on Proposer cases before they join a verification suite.

A case must be the problem's own `Model`, verbatim, with its own `get_inputs`/`get_init_inputs`;
and it must run the reference to completion, quickly, in the OS sandbox (`kiln.tools.sandbox.box`:
no network, no secrets, nothing but its own scratch dir to write, nothing of the user's to read).
What a candidate kernel seems to assume is read by `kiln.agents.facts`.
"""

from __future__ import annotations

import ast
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from kiln.tools import pyparse
from kiln.tools.records import JSON_SAFE

NAME_OK = re.compile(r"^[a-z0-9_]{1,60}$")

def safe_name(name: str) -> str:
    return re.sub(r"[^a-z0-9_]+", "_", name.strip().lower()).strip("_")[:60]


def _top_defs(tree: ast.Module) -> dict[str, ast.AST]:
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}


def static_problem_error(case_src: str, problem_src: str) -> str | None:
    """Why a case module is not a valid variant of the problem, or None."""
    try:
        case = pyparse.parse(case_src)
    except SyntaxError as exc:
        return f"syntax error at line {exc.lineno}: {exc.msg}"
    defs = _top_defs(case)
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if n not in defs]
    if missing:
        return f"missing {', '.join(missing)}"
    problem_model = _top_defs(pyparse.parse(problem_src)).get("Model")
    if problem_model is None or ast.dump(defs["Model"]) != ast.dump(problem_model):
        return "its Model differs from the problem's Model (it must be copied verbatim)"
    return None


class CaseRun(BaseModel):
    """One run of a case's reference in its own process."""

    model_config = JSON_SAFE

    error: str | None = Field(None, description="why it failed, or None")
    forward_s: float | None = Field(None, description="wall seconds of the reference's forward")
    input_numel: int | None = Field(None, description="elements in the tensors get_inputs() returned")
    nonfinite: str | None = Field(None, description="set when a floating output has no finite element: "
                                                    "how many NaN and inf (nothing a kernel could be checked on)")


def run_runner(case_src: str, *, device: str = "cpu", timeout_s: float = 60.0, isolation: str = "best-effort",
               bwrap: str | None = None, mode: str = "reference") -> tuple[Any, dict | None]:
    """Run `kiln.agents.case_runner` on a problem-format module, confined like a check's workers: a
    scrubbed environment, its own scratch dir the only place to write, killed with all it started
    past `timeout_s`. (the process result, the runner's JSON or None)."""
    from kiln.tools.sandbox import scratch
    from kiln.tools.sandbox.box import sandbox_for
    from kiln.tools.sandbox.confine import Confinement
    from kiln.tools.sandbox.isolation import run_isolated, scrubbed_env

    box = sandbox_for(isolation, bwrap)
    with tempfile.TemporaryDirectory(prefix="case-", dir=scratch.root()) as tmp:
        path, out = Path(tmp) / "case.py", Path(tmp) / "result.json"
        path.write_text(case_src)
        env = scrubbed_env(device=device, gpu_index=0, cache_dir=Path(tmp) / "cache")
        env.pop("TRITON_INTERPRET", None)  # the reference is PyTorch: nothing to interpret
        cmd = [sys.executable, "-m", "kiln.agents.case_runner", str(path), str(out), device, mode]
        res = run_isolated(cmd, env=env, cwd=Path(tmp), timeout_s=timeout_s, confinement=Confinement(write=(tmp,)),
                           sandbox=box)
        result = _result(out)
    return res, result


def run_case(case_src: str, *, device: str = "cpu", timeout_s: float = 60.0, isolation: str = "best-effort",
             bwrap: str | None = None) -> CaseRun:
    """Run a problem-format module's reference once (`kiln.agents.case_runner`), sandboxed."""
    res, result = run_runner(case_src, device=device, timeout_s=timeout_s, isolation=isolation, bwrap=bwrap)
    if res.timed_out:
        return CaseRun(error=f"too slow: the reference did not finish in {timeout_s:.0f} s")
    if result is None:
        lines = [ln for ln in res.stderr_tail.strip().splitlines() if ln.strip()]
        return CaseRun(error=f"the reference fails on it: {lines[-1] if lines else f'exit {res.returncode}'}"[:400])
    if not result["ok"]:
        return CaseRun(error=f"the reference fails on it: {result.get('error')}")
    bad = result.get("nonfinite")
    return CaseRun(error=f"the reference gives nothing to check on it: {bad}" if bad else None, nonfinite=bad,
                   forward_s=result.get("forward_s"), input_numel=result.get("input_numel"))


def _result(out: Path) -> dict | None:
    """The runner's result file: read as the sandbox's own (never through a link, never from a FIFO,
    at most 1 MiB); None when it wrote none or wrote something else."""
    from kiln.tools.sandbox.isolation import read_regular

    try:
        data = json.loads(read_regular(out, 1 << 20))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "ok" in data else None


def runtime_error(case_src: str, *, device: str = "cpu", timeout_s: float = 60.0, isolation: str = "best-effort",
                  bwrap: str | None = None) -> str | None:
    """Why the case's reference does not run (sandboxed, once), or None when it works."""
    return run_case(case_src, device=device, timeout_s=timeout_s, isolation=isolation, bwrap=bwrap).error


def module_sizes(src: str) -> str:
    """The module-level constants of a problem-format file ('batch_size = 1024, dim = 513'): its sizes."""
    try:
        tree = pyparse.parse(src)
    except SyntaxError:
        return ""
    out = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Constant | ast.Tuple | ast.BinOp | ast.UnaryOp | ast.List):
                out.append(f"{node.targets[0].id} = {ast.unparse(value)}")
    return ", ".join(out)


ARITH = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow", ast.MatMult: "matmul",
         ast.FloorDiv: "floordiv", ast.Mod: "mod"}


def problem_ops(src: str) -> dict[str, list[str]]:
    """What a problem's Model computes, as names: `heavy` (the calls and modules in __init__ and
    forward: softmax, Linear, cdist, amax, ...) and `arith` (operators: add, mul, ...). Used to keep
    the Coder's few-shot examples away from the benchmark's problems."""
    model = next((n for n in pyparse.parse(src).body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    heavy: set[str] = set()
    arith: set[str] = set()
    for node in ast.walk(model) if model else ():
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name and name not in ("super", "__init__", "view", "reshape", "size", "contiguous"):
                heavy.add(name.lower())
        elif isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in ARITH:
            arith.add(ARITH[type(node.op)])
    return {"heavy": sorted(heavy), "arith": sorted(arith)}
