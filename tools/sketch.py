"""Compare huge outputs on a secret-seeded sketch instead of copying them whole.

KernelBench's level-1 problems produce outputs of 6–8 GB (e.g. 4096×393216 fp32). Saving 20 of
those per check for the parent to compare is out of the question, so above `SKETCH_MIN_NUMEL`
elements each worker reduces an output tensor, on the device, to:
- a uniform sample of `N_UNIFORM` elements at positions drawn from the run's secret seed;
- `N_EDGE` more samples pinned to the first or last index of each dimension in turn, so boundary
  bugs (an off-by-one mask, an unwritten tail row or column) are always in the sample;
- exact whole-tensor counts of NaN, +inf and -inf (kiln poisons fresh memory with NaN, so any
  unwritten element anywhere shows up in the NaN count), and the float64 sum of |x| over finite
  elements (a gross-error check on everything outside the sample).
Both workers draw the same positions, so the parent compares like with like. What this cannot
catch: an error confined to a few interior elements that the sample misses and that is too small
to move the sum of |x|. Outputs below the threshold are always compared element by element.
"""

from __future__ import annotations

import functools
import math
from typing import Any, TypeGuard

import torch

from kiln.tools import chunked

SKETCH_MIN_NUMEL = 1 << 26  # 64 Mi elements: 256 MB in fp32
N_UNIFORM = 1 << 22
N_EDGE = 1 << 16


@functools.lru_cache(maxsize=4)  # 34 MB each on the GPU: the footprint the GPU copies had before
def positions(shape: tuple[int, ...], seed: int, n_uniform: int = N_UNIFORM, n_edge: int = N_EDGE,
              device: str = "cpu") -> torch.Tensor:
    """Flat indices on `device`: uniform ones, then edge ones (coordinate d set to 0 or size-1, d in
    turn), drawn from a generator on that device. Every process that samples the same output on the
    same kind of device draws the same positions (a seeded generator is deterministic for one torch
    build), so the two workers compare like with like; on a GPU the draw takes microseconds where the
    CPU's took 0.1-0.5 s a trial (4 Mi positions). Cached, as an output is sampled several times per
    trial."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed & ((1 << 63) - 1))
    numel = math.prod(shape)
    uniform = torch.randint(0, numel, (n_uniform,), generator=gen, device=device)
    coords = [torch.randint(0, s, (n_edge,), generator=gen, device=device) for s in shape]
    side = torch.randint(0, 2, (n_edge,), generator=gen, device=device)
    which = torch.arange(n_edge, device=device) % len(shape)
    for d, s in enumerate(shape):
        pin = which == d
        coords[d] = torch.where(pin, side * (s - 1), coords[d])
    edge = torch.zeros(n_edge, dtype=torch.long, device=device)
    for d, s in enumerate(shape):
        edge = edge * s + coords[d]
    return torch.cat([uniform, edge])


def positions_on(device: str, shape: tuple[int, ...], seed: int, n_uniform: int = N_UNIFORM,
                 n_edge: int = N_EDGE) -> torch.Tensor:
    """`positions`, drawn on `device` (an output is sampled there on every trial)."""
    return positions(shape, seed, n_uniform, n_edge, sketch_device(device))


def sketch_device(device: str) -> str:
    """`cuda:0` and `cuda` are one generator's device: the cache and the draw use one name."""
    d = torch.device(device)
    return f"{d.type}:{d.index or 0}" if d.type == "cuda" else d.type


def make_sketch(t: torch.Tensor, seed: int, *, n_uniform: int = N_UNIFORM, n_edge: int = N_EDGE,
                on_device: bool = False) -> dict[str, Any]:
    """The sketch of one big tensor (its values on the CPU, or left on the tensor's device). The
    positions are not in it (megabytes per output): `sketch_positions` draws them again from the
    seed and shape."""
    flat = t.detach().reshape(-1)
    pos = positions_on(str(flat.device), tuple(t.shape), seed, n_uniform, n_edge)
    values = flat[pos]
    with torch.no_grad():
        stats = chunked.finite_stats(flat)
    return {"kind": "sketch", "shape": list(t.shape), "seed": seed, "n_uniform": n_uniform, "n_edge": n_edge,
            "device": sketch_device(str(flat.device)), "values": values if on_device else values.cpu(), **stats}


def sketch_positions(sk: dict[str, Any]) -> torch.Tensor:
    """The flat positions a sketch sampled (on the CPU), drawn again from its seed and shape on the
    device it was sampled on."""
    return positions(tuple(sk["shape"]), sk["seed"], sk["n_uniform"], sk["n_edge"], sk.get("device", "cpu")).cpu()


def same_sampling(e: dict[str, Any], a: dict[str, Any]) -> bool:
    keys = ("shape", "seed", "n_uniform", "n_edge")
    return all(e.get(k) == a.get(k) for k in keys) and e["values"].shape == a["values"].shape


def is_sketch(obj: Any) -> TypeGuard[dict[str, Any]]:
    return isinstance(obj, dict) and obj.get("kind") == "sketch"


def unravel(flat_index: int, shape: list[int]) -> list[int]:
    out = []
    for s in reversed(shape):
        out.append(flat_index % s)
        flat_index //= s
    return out[::-1]


def stats_mismatch(e: dict[str, Any], a: dict[str, Any], rtol: float) -> str | None:
    """A whole-tensor disagreement the sample alone might miss, in words; None if none."""
    for key, what in (("nan", "NaN"), ("posinf", "+inf"), ("neginf", "-inf")):
        if a[key] != e[key]:
            return (f"the output holds {a[key]} {what} element(s) where the reference has {e[key]}"
                    + (" (unwritten elements: kiln fills fresh memory with NaN)" if key == "nan" else ""))
    scale = max(abs(e["sum_abs"]), 1e-30)
    if abs(a["sum_abs"] - e["sum_abs"]) / scale > max(10 * rtol, 1e-3):
        return (f"the sum of |output| over the whole tensor is {a['sum_abs']:.6g}, the reference's is "
                f"{e['sum_abs']:.6g}: elements outside the compared sample differ")
    return None
