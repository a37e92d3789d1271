"""Every problem file is a KernelBench-format problem that runs on CPU, fast, on irregular shapes."""

from __future__ import annotations

import ast
import importlib.util
import time

import pytest
import torch

from .corpus_lib import PROBLEMS

PROBLEM_FILES = sorted(PROBLEMS.glob("*.py"))


def load_problem(path):
    spec = importlib.util.spec_from_file_location(f"corpus_problem_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_five_required_problem_kinds_and_a_relu_exist():
    names = {p.stem for p in PROBLEM_FILES}
    assert {"elementwise_gelu", "row_softmax", "sum_middle_dim", "linear_relu", "layernorm", "relu"} <= names


@pytest.mark.parametrize("path", PROBLEM_FILES, ids=lambda p: p.stem)
def test_problem_runs_its_reference_on_cpu(path):
    tree = ast.parse(path.read_text())
    top = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert {"Model", "get_inputs", "get_init_inputs"} <= top
    get_inputs_src = ast.get_source_segment(path.read_text(), next(
        n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs"))
    assert "torch.rand" in get_inputs_src  # rand or randn, on CPU, as KernelBench

    problem = load_problem(path)
    torch.manual_seed(0)
    model = problem.Model(*problem.get_init_inputs())
    inputs = problem.get_inputs()
    assert all(isinstance(t, torch.Tensor) and t.device.type == "cpu" and t.dtype == torch.float32 for t in inputs)
    # Irregular: some input dimension is neither a power of two nor a multiple of 16.
    dims = [d for t in inputs for d in t.shape]
    assert any(d & (d - 1) and d % 16 for d in dims), dims

    torch.manual_seed(1)
    fresh = problem.get_inputs()
    start = time.perf_counter()
    with torch.no_grad():
        out = model(*inputs)
        other = model(*fresh)
    assert time.perf_counter() - start < 1.0
    assert isinstance(out, torch.Tensor) and torch.isfinite(out).all()
    assert not torch.allclose(out, other), "output does not depend on the input: degenerate problem"
    assert out.abs().max() > 1e-3, "output is near zero: degenerate problem"
