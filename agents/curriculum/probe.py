"""The sandboxed probe of generated modules: `python -m kiln.agents.curriculum.probe DEVICE OUT MODULE...`
(a module and its stress variants: one author, one process).

Runs in a confined subprocess (never in kiln's process: the module may be an LLM's). It only
measures and writes what it saw as a JSON list to OUT, one report per module; the parent (`validate`) decides:
- does it run; its outputs under each of the check's hidden input distributions (finite?);
- the same inputs and seed twice (deterministic?); kiln's degeneracy filters; fp32 vs fp64
  (ill-conditioned?); forward time and memory on the device;
- its op graph, traced with `make_fx` (ATen level, so `torch.relu`, `F.relu` and `nn.ReLU` are one
  op), written with every size bucketed to its power of two and float constants dropped.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from kiln.tools import inputs as kin
from kiln.tools.files import load_module
from kiln.tools.integrity import degenerate

ATOL = RTOL = 1e-4


def _load(path: Path) -> Any:
    return load_module(path, "kiln_curriculum_module", register=False)


class Subject:
    def __init__(self, mod: Any, device: str) -> None:
        self.mod, self.device = mod, device

    def build(self, seed: int) -> torch.nn.Module:
        kin.seed_all(seed)
        return self.mod.Model(*self.mod.get_init_inputs()).to(self.device)

    def inputs(self, seed: int, dist: str = "x1") -> tuple:
        return kin.inputs_from_seed(self.mod.get_inputs, seed=seed, dist=dist, dtype="fp32", device=self.device)

    def run(self, model: torch.nn.Module, inputs: tuple) -> list[torch.Tensor]:
        with torch.no_grad():
            out = model(*kin.clone(inputs))
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
            raise TypeError("forward must return a tensor or a tuple of tensors")
        if self.device == "cuda":
            torch.cuda.synchronize()
        return [o.detach().clone() for o in outs]


def _max_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b, strict=True)):
        return math.inf
    return max((float((x.double() - y.double()).abs().nan_to_num(math.inf).max()) if x.numel() else 0.0
                for x, y in zip(a, b, strict=True)), default=0.0)


def _cond_ratio(s: Subject, y32: list[torch.Tensor]) -> float | None:
    """max |fp32 - fp64| / (atol + rtol |fp64|): above ~1 an honest fp32 kernel cannot match."""
    if not all(y.is_floating_point() for y in y32):
        return None
    model = s.build(0).double()
    x64 = tuple(t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in s.inputs(0))
    y64 = s.run(model, x64)
    return max((float(((a.double() - b).abs() / (ATOL + RTOL * b.abs())).max()) if a.numel() else 0.0
                for a, b in zip(y32, y64, strict=True)), default=0.0)


def _timing_ms(s: Subject, model: torch.nn.Module, x: tuple, reps: int = 5) -> float:
    times = []
    for _ in range(reps + 1):
        t0 = time.perf_counter()
        s.run(model, x)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times[1:])


def _bytes(tensors: list[Any]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def _memory(s: Subject, model: torch.nn.Module, x: tuple, y: list[torch.Tensor]) -> int:
    if s.device != "cuda":
        return _bytes(list(x)) + _bytes(list(model.parameters())) + _bytes(y)
    torch.cuda.reset_peak_memory_stats()
    s.run(model, x)
    return int(torch.cuda.max_memory_allocated())


def _bucket(n: int) -> int | str:
    return n if n <= 1 else f"b{math.ceil(math.log2(n))}"


def _norm(a: Any, index: dict, in_list: bool = False) -> Any:
    if isinstance(a, torch.fx.Node):
        return ["n", index[a]]
    if isinstance(a, (list, tuple)):
        return [_norm(v, index, True) for v in a]
    if isinstance(a, dict):
        return {k: _norm(v, index) for k, v in sorted(a.items())}
    if isinstance(a, bool) or a is None:
        return a
    if isinstance(a, int):
        return _bucket(a) if in_list else a  # sizes come in lists (view, expand); dims alone
    if isinstance(a, float):
        return "f"
    return str(a)


def _shape_of(gm: torch.fx.GraphModule, n: torch.fx.Node) -> list | None:
    val = n.meta.get("val")
    if val is None and n.op == "get_attr":
        val = getattr(gm, str(n.target), None)
    shape = getattr(val, "shape", None)
    return [_bucket(int(d)) for d in shape] if shape is not None else None


def canonical_graph(gm: torch.fx.GraphModule) -> list:
    """The traced graph as plain JSON: nodes in order, inputs and weights alike, sizes bucketed."""
    index: dict[torch.fx.Node, int] = {}
    out = []
    for n in gm.graph.nodes:
        index[n] = len(index)
        if n.op in ("placeholder", "get_attr"):
            out.append(["in", _shape_of(gm, n)])
        elif n.op == "output":
            out.append(["out", _norm(n.args, index)])
        else:
            out.append([str(n.target), _shape_of(gm, n), _norm(n.args, index), _norm(dict(n.kwargs), index)])
    return out


def _trace(s: Subject, model: torch.nn.Module, x: tuple) -> list:
    from torch.fx.experimental.proxy_tensor import make_fx

    def fwd(*args: Any) -> Any:
        return model(*args)

    with torch.no_grad():
        return canonical_graph(make_fx(fwd)(*kin.clone(x)))


def _guard(report: dict, key: str, fn: Any) -> None:
    try:
        report[key] = fn()
    except Exception as err:  # noqa: BLE001 - every failure is a measurement for the parent
        report[f"{key}_error"] = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:300]


def probe(path: Path, device: str) -> dict:
    report: dict[str, Any] = {"device": device}
    try:
        s = Subject(_load(path), device)
        model, x = s.build(0), s.inputs(0)
        y = s.run(model, x)
    except Exception as err:  # noqa: BLE001 - the module does not run: that is the finding
        report["run_error"] = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:300]
        return report
    report["outputs"] = [list(t.shape) for t in y]
    report["numel"] = sum(t.numel() for t in y)
    _guard(report, "nonfinite", lambda: {d: sum(int((~torch.isfinite(t)).sum()) for t in s.run(model, s.inputs(0, d))
                                             if t.is_floating_point()) for d in kin.DISTRIBUTIONS})
    _guard(report, "rerun_diff", lambda: _max_diff(y, s.run(s.build(0), x)))
    _guard(report, "degenerate", lambda: degenerate.assess(s.build, s.inputs, atol=ATOL, rtol=RTOL).reasons)
    _guard(report, "cond_ratio", lambda: _cond_ratio(s, y))
    _guard(report, "time_ms", lambda: _timing_ms(s, model, x))
    _guard(report, "memory_bytes", lambda: _memory(s, model, x, y))
    _guard(report, "graph", lambda: _trace(s, model, x))
    return report


def main(argv: list[str]) -> int:
    device, out, *paths = argv
    reports = [probe(Path(p), device) for p in paths]
    Path(out).write_text(json.dumps(reports, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
