"""Will a check fit under Triton's interpreter? An estimate before any LLM call, on a CPU run.

On a CPU every Triton kernel runs in Python under `TRITON_INTERPRET=1`, about a million times
slower than on a GPU. A KernelBench problem sized for an H200 (40_LayerNorm: a 67M-element input)
then spends its whole check budget on one call and times out in every round. The estimate:

    seconds per call  ~ (input + output elements) x (op weight + 1) x c
    seconds per check ~ calls per check x seconds per call

`c` (seconds per element-op) is measured once per machine on an elementwise kernel under the
interpreter (cached in kiln's cache folder); the sizes come from the problem's own `get_inputs()`
and `Model` run on PyTorch's `meta` device (no memory, no arithmetic), in a subprocess; the op
weight counts the calls in `Model.forward`, normalisations and softmaxes counting several passes.
It is an estimate, within a few times the measured check time (bench/RESULTS.md), which is enough
to tell a problem that fits from one a thousand times too large.
"""

from __future__ import annotations

import ast
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from kiln.graphs.shrink import ShrinkRecord, fit, sizes_of
from kiln.tools.errors import KilnInputError
from kiln.tools.records import JSON_SAFE

# forward() calls that take several passes over the data under the interpreter (each counts this many)
PASSES = {"layer_norm": 5, "layernorm": 5, "group_norm": 5, "groupnorm": 5, "batch_norm": 5, "instance_norm": 5,
          "rms_norm": 5, "rmsnorm": 5, "softmax": 4, "log_softmax": 4, "logsoftmax": 4, "logsumexp": 4,
          "matmul": 8, "mm": 8, "bmm": 8, "linear": 8, "conv": 8}
CALIBRATION_N = 1 << 20
CALIBRATION_OPS = 4  # the calibration kernel's arithmetic per element (plus its load and store)
# each check call of the candidate: every trial of every input distribution, twice (first call, repeat)
CALLS_PER_TRIAL = 2


class InterpEstimate(BaseModel):
    """What a CPU check of this problem would cost under the interpreter, before any call is made."""

    model_config = JSON_SAFE

    input_numel: int
    output_numel: int
    op_weight: int = Field(description="calls in Model.forward, normalisations and softmaxes counting several")
    s_per_elem_op: float = Field(description="this machine's interpreter, calibrated")
    calls: int = Field(description="candidate calls in one check of the problem alone")
    per_call_s: float
    check_s: float
    budget_s: float = Field(description="the check's correctness budget (its share of --check-timeout)")

    @property
    def fits(self) -> bool:
        return self.check_s <= self.budget_s

    def line(self, name: str) -> str:
        return (f"{name} under Triton's interpreter: about {self.check_s:,.0f} s per check "
                f"({self.input_numel + self.output_numel:,} elements in and out, op weight {self.op_weight}, "
                f"{self.calls} calls at ~{self.per_call_s:,.1f} s) against a {self.budget_s:.0f} s budget")


def op_weight(source: str) -> int:
    """Calls in `Model.forward` (attribute or function names), heavy ones counting several passes."""
    tree = ast.parse(source)
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    forward = next((n for n in (model.body if model else []) if isinstance(n, ast.FunctionDef) and n.name == "forward"),
                   None)
    modules = _module_kinds(model) if model else {}
    weight = 0
    for node in ast.walk(forward) if forward else []:
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            kind = modules.get(name, name).lower()
            weight += next((w for k, w in PASSES.items() if k in kind), 1)
    return max(1, weight)


def _module_kinds(model: ast.ClassDef) -> dict[str, str]:
    """`self.ln = nn.LayerNorm(...)` in __init__ -> {"ln": "LayerNorm"}."""
    out = {}
    for node in ast.walk(model):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            kind = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            for target in node.targets:
                if isinstance(target, ast.Attribute):
                    out[target.attr] = kind
    return out


CALIBRATE = r"""
import json, sys, time
import torch, triton, triton.language as tl
from kiln.tools import interpreter
interpreter.install()  # as every check worker runs it

@triton.jit
def axpb_relu_sq(x, y, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    mask = offs < n
    v = tl.load(x + offs, mask=mask)
    v = tl.maximum(v * 1.5 + 0.5, 0.0)
    tl.store(y + offs, v * v, mask=mask)

n = int(sys.argv[1])
x = torch.rand(n)
y = torch.empty_like(x)
axpb_relu_sq[(4,)](x, y, 4096, B=1024)  # warm up
t0 = time.perf_counter()
axpb_relu_sq[(triton.cdiv(n, 1024),)](x, y, n, B=1024)
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""


def _python(code: str, *args: str, env: dict[str, str] | None = None, timeout_s: float = 300) -> dict:
    clean = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout_s,
                          env={**clean, **(env or {})})
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _calibration_file() -> Path:
    from kiln.tools.compile import default_cache_root

    return default_cache_root() / "interpreter_cost.json"


def s_per_elem_op() -> float:
    """This machine's interpreter cost per element and op (measured once, then read from the cache)."""
    import triton

    key = (f"{platform.machine()}|{platform.processor() or platform.node()}|{sys.version_info[:2]}|{triton.__version__}"
           "|shortcuts")  # measured with kiln.tools.interpreter's shortcuts, as the workers run
    path = _calibration_file()
    try:
        cached = json.loads(path.read_text())
        if cached.get("key") == key:
            return float(cached["s_per_elem_op"])
    except (OSError, ValueError, KeyError):
        pass
    secs = _python(CALIBRATE, str(CALIBRATION_N), env={"TRITON_INTERPRET": "1"})["seconds"]
    value = secs / (2 * CALIBRATION_N * (CALIBRATION_OPS + 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": key, "s_per_elem_op": value, "calibration_s": secs}))
    return value


def calls_per_check(trials: int) -> int:
    from kiln.tools.inputs import DISTRIBUTIONS, trial_count

    return CALLS_PER_TRIAL * sum(trial_count(d, trials) for d in DISTRIBUTIONS)


def estimate(source: str, sizes: tuple[int, int], trials: int, budget_s: float) -> InterpEstimate:
    """The estimate for a problem source whose inputs and outputs hold `sizes` elements."""
    n_in, n_out = sizes
    weight, c, calls = op_weight(source), s_per_elem_op(), calls_per_check(trials)
    per_call = (n_in + n_out) * (weight + 1) * c
    return InterpEstimate(input_numel=n_in, output_numel=n_out, op_weight=weight, s_per_elem_op=c, calls=calls,
                          per_call_s=per_call, check_s=per_call * calls, budget_s=budget_s)


MARGIN = 0.2  # --shrink aims at a fifth of the budget: a stress round checks the problem and its cases in one budget


def check_budget_s(check: Any) -> float:
    """The correctness stage's share of --check-timeout: where a check's many calls must fit."""
    from kiln.tools.check.budgets import stage_timeouts

    return stage_timeouts(check)["correctness"]


def fit_cpu(problem: Path, check: Any, shrink: bool) -> tuple[str, ShrinkRecord] | None:
    """On a CPU: None when the problem fits the check's budget as written; with `shrink`, the source
    at smaller sizes and what changed; otherwise KilnInputError, in one line, before any LLM call."""
    source = problem.read_text()
    sizes = sizes_of(source, problem)
    before = estimate(source, sizes, check.trials, check_budget_s(check))
    if before.fits:
        return None
    if not shrink:
        raise KilnInputError(f"{before.line(problem.stem)}: too large to check on a CPU; rerun with --shrink "
                             "(smaller sizes, said and recorded), a larger --check-timeout, or on a GPU")
    per_numel = before.check_s / (before.input_numel + before.output_numel)
    new_source, changed, (n_in, n_out) = fit(source, problem, int(before.budget_s * MARGIN / per_numel))
    after = estimate(new_source, (n_in, n_out), check.trials, before.budget_s)
    record = ShrinkRecord(original_problem=str(problem), constants=changed, input_numel_before=before.input_numel,
                          input_numel_after=n_in, output_numel_before=before.output_numel, output_numel_after=n_out,
                          estimate_s_before=before.check_s, estimate_s_after=after.check_s)
    if not after.fits:
        raise KilnInputError(f"{after.line(problem.stem)} even after --shrink ({record.line()})")
    return new_source, record
