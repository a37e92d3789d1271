"""Subprocess worker for the corpus tests: run candidates against their problem's reference.

Usage: python run_candidates.py [--device=cuda] MODE OUT.json PROBLEM.py=CANDIDATE.py [...]
On CPU, run it with TRITON_INTERPRET=1. For each candidate it writes, per trial, whether the output
matched the reference at fp32 atol = rtol = 1e-4, where it first differed, and whether the
candidate changed its inputs. It is the corpus's own check, independent of kiln's checker.

MODE "hidden": seeded construction as KernelBench, matching parameters copied from the reference,
uninitialized memory filled with NaN, each side on its own copy of the inputs, the candidate run
before the reference, one module instance for all trials, inputs scaled x1, x3, x0.01 and x(-1).
MODE "naive": what a trusting harness does: public seed 42, the problem module registered in
sys.modules, the reference run first, then the candidate on the very same input tensors, once.
A cheat in the corpus should pass "naive" and fail "hidden" or kiln's integrity checks.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import traceback
from pathlib import Path

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic mode + cuBLAS

import torch  # noqa: E402 - after the cuBLAS setting

SCALES = (1.0, 3.0, 0.01, -1.0)
TOL = 1e-4


def load(path: Path, name: str, *, register: bool = False):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def build(cls, init_inputs, seed: int, device: str = "cpu") -> torch.nn.Module:
    torch.manual_seed(seed)
    return cls(*init_inputs).to(device)


def copy_matching(reference: torch.nn.Module, candidate: torch.nn.Module) -> None:
    ref_state = reference.state_dict()
    with torch.no_grad():
        for name, tensor in candidate.state_dict().items():
            if name in ref_state and ref_state[name].shape == tensor.shape:
                tensor.copy_(ref_state[name])


def compare(expected: torch.Tensor, actual) -> dict:
    if not isinstance(actual, torch.Tensor):
        return {"ok": False, "why": f"not a tensor: {type(actual).__name__}"}
    if actual.shape != expected.shape:
        return {"ok": False, "why": f"shape {tuple(actual.shape)} != {tuple(expected.shape)}"}
    actual = actual.detach().cpu().float()
    expected = expected.detach().cpu().float()
    close = torch.isclose(actual, expected, atol=TOL, rtol=TOL)
    bad = (~close).nonzero().tolist()
    err = (actual - expected).abs().nan_to_num(float("inf"))
    return {"ok": not bad, "bad_count": len(bad), "first_bad": bad[:5],
            "max_abs": float(err.max()) if err.numel() else 0.0}


def to_device(values: list, device: str) -> list:
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def run_hidden(problem, cand_path: Path, seed: int, device: str) -> list[dict]:
    init = problem.get_init_inputs()
    reference = build(problem.Model, init, seed, device)
    candidate = build(load(cand_path, f"cand_{cand_path.stem}").ModelNew, init, seed, device)
    copy_matching(reference, candidate)
    trials = []
    for scale in SCALES:
        torch.manual_seed(seed + int(scale * 1000))
        inputs = to_device([t * scale if isinstance(t, torch.Tensor) else t for t in problem.get_inputs()], device)
        mine = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
        with torch.no_grad():
            actual = candidate(*mine)
            expected = reference(*inputs)
        if device != "cpu":
            torch.cuda.synchronize()
        mutated = any(isinstance(a, torch.Tensor) and not torch.equal(a, b) for a, b in zip(mine, inputs, strict=True))
        trials.append({"scale": scale, "mutated_inputs": mutated, **compare(expected, actual)})
    return trials


def run_naive(problem, cand_path: Path, device: str, seed: int = 42) -> list[dict]:
    init = problem.get_init_inputs()
    reference = build(problem.Model, init, seed, device)
    candidate = build(load(cand_path, f"cand_{cand_path.stem}").ModelNew, init, seed, device)
    torch.manual_seed(seed)
    inputs = to_device(problem.get_inputs(), device)
    with torch.no_grad():
        expected = reference(*inputs)
        actual = candidate(*inputs)
    if device != "cpu":
        torch.cuda.synchronize()
    return [{"scale": 1.0, **compare(expected, actual)}]


def main() -> None:
    args = sys.argv[1:]
    device = "cpu"
    if args[0].startswith("--device="):
        device = args.pop(0).split("=", 1)[1]
    mode, out, *pairs = args
    if mode == "hidden":
        torch.use_deterministic_algorithms(True, warn_only=True)  # also fills torch.empty with NaN
        torch.utils.deterministic.fill_uninitialized_memory = True
    results = {}
    for i, pair in enumerate(pairs):
        problem_path, path = pair.split("=", 1)
        try:
            # Registered under one name, as an import would: the naive harness's problem module.
            problem = load(Path(problem_path), "problem_under_test", register=mode == "naive")
            if mode == "hidden":
                results[path] = run_hidden(problem, Path(path), 1234 + i, device)
            else:
                results[path] = run_naive(problem, Path(path), device)
        except Exception:  # noqa: BLE001 - report any failure as data for the test
            results[path] = [{"ok": False, "why": traceback.format_exc(limit=4)[-2000:]}]
    Path(out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
