"""Quick numerical self-check of built-in candidates against their problems, one process for many.

    python -m kiln.agents.builtin.selfcheck PROBLEM.py CANDIDATE.py [PROBLEM.py CANDIDATE.py ...]

Prints one JSON object per pair: {"problem", "ok", "max_abs_err", "error"}. For the built-in
policies' own tests (run with TRITON_INTERPRET=1 on CPU); `kiln check` is the real verifier.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType

import torch

from kiln.tools import interpreter
from kiln.tools.files import load_module
from kiln.tools.inputs import DISTRIBUTIONS as INPUT_DISTRIBUTIONS

DISTRIBUTIONS = {name: d.scale for name, d in INPUT_DISTRIBUTIONS.items() if not d.wide}
"""The check's own input distributions (`kiln.tools.inputs`), the narrow ones: name -> scale."""


def _load(path: str, name: str) -> ModuleType:
    return load_module(path, name, register=False)


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def _scaled(t: object, scale: float, dev: str) -> object:
    """A tensor input on the device, times the distribution's scale unless it holds integers (class
    indices stay indices: kiln's check, `kiln.tools.inputs.prepare`, scales only floating inputs)."""
    if not torch.is_tensor(t):
        return t
    integer = not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool)
    return t.to(dev) if integer else t.to(dev) * scale


def check_pair(problem: str, candidate: str, idx: int, atol: float = 1e-4, rtol: float = 1e-4) -> dict:
    prob, cand = _load(problem, f"_kiln_p{idx}"), _load(candidate, f"_kiln_c{idx}")
    dev = _device()
    torch.manual_seed(0)
    ref = prob.Model(*prob.get_init_inputs()).to(dev)
    torch.manual_seed(0)
    new = cand.ModelNew(*prob.get_init_inputs()).to(dev)
    new.load_state_dict(ref.state_dict())
    worst = 0.0
    for dist, scale in DISTRIBUTIONS.items():
        torch.manual_seed(1)
        inputs = [_scaled(t, scale, dev) for t in prob.get_inputs()]
        with torch.no_grad():
            want, got = ref(*inputs), new(*inputs)
        if want.shape != got.shape:
            return {"problem": problem, "ok": False, "error": f"{dist}: shape {list(got.shape)} != {list(want.shape)}"}
        err = (got.float() - want.float()).abs()
        worst = max(worst, float(err.max()) if err.numel() else 0.0)
        if not torch.allclose(got.float(), want.float(), atol=atol, rtol=rtol, equal_nan=True):
            return {"problem": problem, "ok": False, "max_abs_err": float(err.max()), "error": f"{dist}: values differ"}
    return {"problem": problem, "ok": True, "max_abs_err": worst, "error": None}


def main(argv: list[str]) -> int:
    if len(argv) % 2:
        print("usage: selfcheck PROBLEM CANDIDATE [PROBLEM CANDIDATE ...]", file=sys.stderr)
        return 2
    interpreter.install()
    bad = 0
    for i in range(0, len(argv), 2):
        try:
            res = check_pair(argv[i], argv[i + 1], i)
        except Exception as err:  # noqa: BLE001 - a crashing candidate is a result, not a crash of the checker
            res = {"problem": argv[i], "ok": False, "error": f"{type(err).__name__}: {err}"[:2000]}
        bad += not res["ok"]
        print(json.dumps(res), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


__all__ = ["Path", "check_pair", "main"]
