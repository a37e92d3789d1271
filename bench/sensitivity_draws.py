"""How close an honest kernel comes to the numerics rule's allowance over many input draws, with the
sensitivity's one draw and with the eight a close call gets (docs/tolerance.md).

For each seed: the case's inputs for one distribution (kiln's own draw), the problem's Model with
that seed's weights, the candidate's ModelNew with the same weights, the reference's numerics as the
reference worker computes them, and the worst |error| / allowance over the output; then the same
after `numerics.refine_sensitivity`. Runs in-process on the CPU (Triton kernels under
TRITON_INTERPRET=1) or on a GPU; no sandbox: the kernels given must be trusted.

    TRITON_INTERPRET=1 python bench/sensitivity_draws.py --seeds 0-59 \\
        --problem tests/fixtures/llm-transcripts/99/99_Matmul_GELU_Softmax.py \\
        --case tests/core/data/numerics/replay99_large_signed_logits.py \\
        --kernel tests/fixtures/llm-transcripts/kernels/99_Matmul_GELU_Softmax.py --dist heavy
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType


def load(path: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def worst(packed: dict, ref: dict, got: dict, atol: float, rtol: float) -> float:
    """The worst |error| / allowance over the packed reference's outputs."""
    from kiln.tools import tolerance

    r = 0.0
    for name, data in packed["numerics"]["outputs"].items():
        v = tolerance.numerics_values(ref[name].cpu(), got[name].cpu(), data["err"], data["mag"], dtype="fp32",
                                      atol=atol, rtol=rtol, sens=data.get("sens"))
        r = max(r, v.ratio if not isinstance(v, str) else float("nan"))
    return r


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", required=True, help="KernelBench-format problem (its Model)")
    ap.add_argument("--case", help="case file (get_inputs / get_init_inputs); default: the problem's own")
    ap.add_argument("--kernel", required=True, help="candidate file defining ModelNew (trusted: runs unsandboxed)")
    ap.add_argument("--dist", default="x1", help="input distribution (kiln.tools.inputs.DISTRIBUTIONS)")
    ap.add_argument("--seeds", default="0-19", help="e.g. 0-59 or 3,11,14")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", help="write one row per seed here")
    a = ap.parse_args()

    import torch

    from kiln.tools import numerics
    from kiln.tools.correctness import leaves, tolerances
    from kiln.tools.inputs import inputs_from_seed, seed_all

    prob = load(a.problem, "problem")
    case = load(a.case, "case") if a.case else prob
    cand = load(a.kernel, "candidate")
    atol, rtol = tolerances("fp32", None, None)
    rows = []
    for seed in seeds(a.seeds):
        seed_all(seed)
        model = prob.Model(*case.get_init_inputs()).to(a.device)
        new = cand.ModelNew(*case.get_init_inputs()).to(a.device)
        new.load_state_dict(model.state_dict())
        x = inputs_from_seed(case.get_inputs, seed=seed, dist=a.dist, dtype="fp32", device=a.device)
        num = numerics.build(model, "fp32")
        packed, why = numerics.reference_trial(model, num, x, x, seed=seed)
        if packed is None:
            print(f"seed {seed}: dropped ({why})")
            continue
        with torch.no_grad():
            got = dict(leaves(new(*x)))
            ref = dict(leaves(model(*x)))

        one = worst(packed, ref, got, atol, rtol)
        refine = getattr(numerics, "refine_sensitivity", None)  # absent before 2026-12-07: one draw only
        refined = refine is not None and refine(num, x, packed, seed=seed)
        eight = worst(packed, ref, got, atol, rtol) if refined else float("nan")
        rows.append({"seed": seed, "one_draw": one, "eight_draws": eight})
        print(f"seed {seed}: worst error / allowance {one:.3f} (one draw), {eight:.3f} (eight)", flush=True)
    for key in ("one_draw", "eight_draws"):
        top = sorted((r for r in rows if r[key] == r[key]), key=lambda r: r[key])[-5:]  # NaN: not computed
        if not top:
            continue
        print(f"five worst, {key.replace('_', ' ')}: " + ", ".join(f"{r[key]:.2f} (seed {r['seed']})" for r in top))
    if a.json:
        Path(a.json).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
