"""Run a stress case's reference once, in its own process: `python -m kiln.agents.case_runner CASE OUT DEVICE
[MODE]`; MODE `work` counts its FLOPs and bytes on the meta device instead (a problem's real sizes).

Writes {"ok": bool, "error": str | None, "forward_s": float, "input_numel": int, "nonfinite": str | None} to
OUT (`nonfinite`: set when a floating output has no finite element). The parent enforces the time
limit and kills the whole process group when it is exceeded."""

from __future__ import annotations

import json
import sys
import time
import traceback

from kiln.tools.files import load_module


def _run(case: str, device: str) -> dict:
    import torch

    mod = _load(case)
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs()).to(device)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
    t0 = time.monotonic()
    with torch.no_grad():
        out = model(*inputs)
    if device == "cuda":
        torch.cuda.synchronize()
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
        return {"ok": False, "error": f"forward returned {type(out).__name__}, not tensors"}
    numel = sum(x.numel() for x in inputs if isinstance(x, torch.Tensor))
    return {"ok": True, "error": None, "forward_s": time.monotonic() - t0, "input_numel": numel,
            "nonfinite": _nonfinite(outs)}


def _nonfinite(outs: list) -> str | None:
    """When some floating output has no finite element at all: how many NaN / inf (nothing to verify)."""
    import torch

    for i, o in enumerate(outs):
        if o.is_floating_point() and o.numel() and not bool(torch.isfinite(o).any()):
            n_nan = int(torch.isnan(o).sum())
            name = "the output" if len(outs) == 1 else f"output {i}"
            return f"no element of {name} is finite ({n_nan} NaN and {o.numel() - n_nan} inf of {o.numel()})"
    return None


def _load(case: str):  # noqa: ANN202 - the problem module
    return load_module(case, "kiln_stress_case", register=False)


def _work(case: str) -> dict:
    """The reference's work at the module's sizes, counted on the meta device (no memory, no
    arithmetic: any size): FLOPs (torch's flop counter) and the bytes of its inputs, parameters and
    outputs, each once."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    mod = _load(case)
    with torch.device("meta"):
        torch.manual_seed(0)
        model = mod.Model(*mod.get_init_inputs())
        inputs = mod.get_inputs()
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        out = model(*inputs)
    outs = out if isinstance(out, (tuple, list)) else [out]

    def nbytes(ts: list) -> int:
        return sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor))

    held = [*model.parameters(), *model.buffers()]
    return {"ok": True, "error": None, "flops": int(counter.get_total_flops()) or None,
            "io_bytes": nbytes(list(inputs)) + nbytes(held) + nbytes(list(outs))}


def main() -> None:
    case, out, device = sys.argv[1:4]
    mode = sys.argv[4] if len(sys.argv) > 4 else "reference"
    try:
        result = _work(case) if mode == "work" else _run(case, device)
    except Exception as err:  # noqa: BLE001 - any failure of the case is the verdict
        tb = traceback.format_exc().strip().splitlines()[-1]
        result = {"ok": False, "error": f"{type(err).__name__}: {err}"[:500] or tb}
    with open(out, "w") as fh:
        json.dump(result, fh)


if __name__ == "__main__":
    main()
