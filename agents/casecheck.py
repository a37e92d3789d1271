"""Checks on Proposer cases before they join a verification suite.

A case must be the problem's own `Model`, verbatim, with its own `get_inputs`/`get_init_inputs`;
and it must run the reference to completion, quickly, in the OS sandbox (`kiln.tools.check.sandbox`:
no network, no secrets, nothing but its own scratch dir to write, nothing of the user's to read).
Also: what a candidate kernel seems to assume (block sizes, masks, contiguity), read from its
source, so the Proposer can aim at it.
"""

from __future__ import annotations

import ast
import re
import sys
import tempfile
from pathlib import Path

from kiln.tools import pyparse

NAME_OK = re.compile(r"^[a-z0-9_]{1,60}$")

_RUNNER = r"""
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("kiln_case", sys.argv[1])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
device = sys.argv[2]
torch.manual_seed(0)
model = mod.Model(*mod.get_init_inputs()).to(device)
inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
with torch.no_grad():
    out = model(*inputs)
outs = out if isinstance(out, (tuple, list)) else [out]
if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
    raise SystemExit("the reference returned no tensor")
if device == "cuda":
    torch.cuda.synchronize()
"""


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


def runtime_error(case_src: str, *, device: str = "cpu", timeout_s: float = 60.0, isolation: str = "best-effort",
                  bwrap: str | None = None) -> str | None:
    """Run the case's reference once, confined like a check's workers (a one-shot sandboxed run: a
    scrubbed environment, its own dir the only place to write); None when it works."""
    from kiln.tools.check import scratch
    from kiln.tools.check.confine import Confinement
    from kiln.tools.check.isolation import run_isolated, scrubbed_env
    from kiln.tools.check.sandbox import sandbox_for

    box = sandbox_for(isolation, bwrap)
    with tempfile.TemporaryDirectory(prefix="case-", dir=scratch.root()) as tmp:
        path = Path(tmp) / "case.py"
        path.write_text(case_src)
        env = scrubbed_env(device=device, gpu_index=0, cache_dir=Path(tmp) / "cache")
        env.pop("TRITON_INTERPRET", None)  # the reference is PyTorch: nothing to interpret
        res = run_isolated([sys.executable, "-c", _RUNNER, str(path), device], env=env, cwd=Path(tmp),
                           timeout_s=timeout_s, confinement=Confinement(write=(tmp,)), sandbox=box)
    if res.timed_out:
        return f"too slow: the reference did not finish in {timeout_s:.0f} s"
    if res.returncode != 0:
        lines = [ln for ln in res.stderr_tail.strip().splitlines() if ln.strip()]
        return f"the reference fails on it: {lines[-1] if lines else f'exit {res.returncode}'}"
    return None


def candidate_facts(src: str, limit: int = 10) -> list[str]:
    """Plain statements of what a kernel seems to assume, for the Proposer to attack."""
    facts: list[str] = []
    for name, value in sorted(set(re.findall(r"\b([A-Z_]*BLOCK[A-Z_0-9]*)\s*=\s*(\d+)", src))):
        facts.append(f"block size {name} = {value}: try sizes {value}, {int(value) + 1}, {2 * int(value) - 1}")
    if "next_power_of_2" in src:
        facts.append("a block size is the next power of two of a dimension: try 2^k and 2^k + 1")
    loads = len(re.findall(r"tl\.load\(", src))
    masked = len(re.findall(r"tl\.load\([^)]*mask\s*=", src))
    if loads and masked < loads:
        facts.append(f"{loads - masked} of {loads} tl.load calls have no mask: sizes off the block grid may read past the end")
    for n in sorted(set(re.findall(r"__shared__\s+\w+\s+\w+\[(\d+)\]", src))):
        facts.append(f"a fixed shared-memory array of {n} elements: try dimensions just past it")
    if re.search(r"\bint\s+(idx|i|tid|index)\s*=\s*blockIdx", src):
        facts.append("32-bit indices: very large tensors may overflow them")
    if ".contiguous()" not in src and (".stride(" not in src and "stride" not in src):
        facts.append("no .contiguous() and no strides: transposed or sliced inputs may be read wrongly")
    facts += [f"asserts: {a.strip()}" for a in re.findall(r"^\s*assert\s+(.+)$", src, re.MULTILINE)[:3]]
    return facts[:limit]
