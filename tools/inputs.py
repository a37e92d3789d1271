"""Inputs for correctness trials and timing, made identically in the reference and candidate workers.

Every trial draws fresh inputs from the run's secret seed: `torch`, `random` and `numpy` are seeded
with a per-(case, distribution, trial) seed, then the problem's own `get_inputs()` runs. Hidden
distributions scale its floating tensors by x1, x3, x0.01 and x(-1) (KernelBench inputs are mostly
`torch.rand`, never negative), and, to cover an op's domain (a fit valid only on the tested range
fails), by x1000, x0.001 and a heavy-tailed factor with the same sign pattern (each element times
exp(2 z), z ~ N(0, 1) clipped to +-4: magnitudes from 3e-4 to 3e3 times the drawn value in one
tensor). Those three are `wide`: the reference worker drops one for a problem when the reference's
outputs are not finite on it (`exp(1000 x)` overflows), and says so in the record. Floating tensors
are then cast to the run's dtype and moved to the device, as KernelBench does; integers and other
numbers pass through unchanged.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

import torch

from kiln.tools import chunked
from kiln.tools.draws import (  # noqa: F401 - re-exported: the distributions are part of this module's API
    DISTRIBUTIONS,
    HEAVY_CLIP,
    HEAVY_SIGMA,
    Distribution,
    derive_seed,
    trial_count,
)

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class InputsError(Exception):
    """The problem's get_inputs / get_init_inputs returned something kiln can't feed a model."""


def seed_all(seed: int) -> None:
    seed_torch(seed)
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % (2**32))
    except ImportError:  # numpy is optional for problems
        pass


def seed_torch(seed: int) -> None:
    """What `torch.manual_seed(seed)` does to the generators kiln draws from (the CPU's and every
    started CUDA device's: the same states, so the same draws), without its cost. `torch.manual_seed`
    also seeds XPU and MTIA, which a CUDA machine never starts, and queues each such call with a
    formatted stack trace: ~1-2.5 ms a call, paid once per trial and once per timing-ring slot per lap
    (a lap of 176 small slots spent ~0.4 s drawing). While CUDA has not started, torch's own call is
    kept: it queues the CUDA seeding for CUDA's start."""
    seed = int(seed)
    if torch.cuda.is_initialized():
        for gen in torch.cuda.default_generators:
            gen.manual_seed(seed)
    elif torch.backends.cuda.is_built() and torch.cuda.is_available():
        torch.manual_seed(seed)
        return
    torch.default_generator.manual_seed(seed)


def validate(values: Any, where: str) -> list[Any]:
    """Inputs must be a list/tuple of tensors, plain numbers (bool, int, float) or tuples/lists of
    numbers (a shape, as KernelBench's LayerNorm passes `normalized_shape`)."""
    if not isinstance(values, (list, tuple)):
        raise InputsError(f"{where} must return a list or tuple, got {type(values).__name__}")
    for i, v in enumerate(values):
        if not isinstance(v, torch.Tensor) and not _numbers(v):
            raise InputsError(f"{where}[{i}] is a {type(v).__name__}; inputs must be tensors, numbers "
                              "or tuples of numbers")
    return list(values)


def _numbers(v: Any) -> bool:
    if isinstance(v, (list, tuple)):
        return all(_numbers(x) for x in v)
    return isinstance(v, (bool, int, float))


def prepare(values: list[Any], *, dtype: str, device: str, scale: float = 1.0, heavy_seed: int | None = None
            ) -> tuple[Any, ...]:
    """Scale floating tensors by the distribution (and, with `heavy_seed`, a heavy-tailed factor
    per element), cast to the run dtype, move to the device."""
    out = []
    for i, v in enumerate(values):
        if isinstance(v, torch.Tensor):
            if v.is_floating_point():
                v = v * scale if scale != 1.0 else v
                if heavy_seed is not None:
                    v = heavy_tailed(v, derive_seed(heavy_seed, "heavy", i))
                v = v.to(DTYPES[dtype])
            v = v.to(device)
        out.append(v)
    return tuple(out)


def heavy_tailed(v: torch.Tensor, seed: int) -> torch.Tensor:
    """v * exp(HEAVY_SIGMA * z), z ~ N(0, 1) clipped to +-HEAVY_CLIP, drawn on v's device from
    `seed` (so both workers, on the same device, make the same tensor)."""
    gen = torch.Generator(device=v.device)
    gen.manual_seed(seed)
    z = torch.randn(v.shape, generator=gen, device=v.device, dtype=v.dtype)
    return v * z.clamp_(-HEAVY_CLIP, HEAVY_CLIP).mul_(HEAVY_SIGMA).exp_()


def make_inputs(get_inputs: Callable[[], Any], *, secret: int, case: str, dist: str, trial: int,
                dtype: str, device: str) -> tuple[Any, ...]:
    return inputs_from_seed(get_inputs, seed=derive_seed(secret, case, dist, trial), dist=dist, dtype=dtype,
                            device=device)


def inputs_from_seed(get_inputs: Callable[[], Any], *, seed: int, dist: str, dtype: str, device: str
                     ) -> tuple[Any, ...]:
    """One trial's inputs from that trial's own seed (what the candidate's worker is given, never the
    secret the seed was derived from)."""
    seed_all(seed)
    values = validate(_draw_on(device, get_inputs, seed), "get_inputs()")
    d = DISTRIBUTIONS[dist]
    return prepare(values, dtype=dtype, device=device, scale=d.scale, heavy_seed=seed if d.heavy else None)


def draw_stream(get_inputs: Callable[[], Any], *, seed: int, n: int, dtype: str, device: str) -> Iterator[tuple[Any, ...]]:
    """`n` draws of the x1 inputs from one seeding: the generators seeded once, then each draw the
    next `get_inputs()` call (a timing lap's slots). The same seed gives the same sequence as long as
    nothing else draws in between, so a consumer takes each draw before asking for the next."""
    seed_all(seed)
    on_device = device != "cpu"
    for _ in range(n):
        if on_device:
            try:
                with torch.device(device):
                    values = get_inputs()
            except Exception:  # noqa: BLE001 - a get_inputs that needs the CPU: the rest of the stream there
                on_device = False
                seed_all(seed)  # from the stream's start, as `_draw_on`'s fallback: the same in every worker
        if not on_device:
            values = get_inputs()
        yield prepare(validate(values, "get_inputs()"), dtype=dtype, device=device)


def _draw_on(device: str, get_inputs: Callable[[], Any], seed: int) -> Any:
    """Run get_inputs() with `device` as torch's default device, so KernelBench's multi-GB
    `torch.rand(...)` inputs are drawn on the GPU (seconds on the CPU, microseconds there). Both
    workers do the same, so their inputs stay identical. A problem whose get_inputs needs CPU
    tensors (numpy interop, say) falls back to drawing on the CPU."""
    if device == "cpu":
        return get_inputs()
    try:
        with torch.device(device):
            return get_inputs()
    except Exception:  # noqa: BLE001 - fall back to the CPU, exactly as KernelBench draws them
        seed_all(seed)
        return get_inputs()


def clone(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(v.clone() if isinstance(v, torch.Tensor) else v for v in inputs)


def same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Bitwise-identical (so NaN equals NaN): used to detect input mutation."""
    for x, y in zip(a, b, strict=True):
        if isinstance(x, torch.Tensor):
            if not isinstance(y, torch.Tensor) or not chunked.same_bits(x, y):
                return False
        elif x != y:
            return False
    return True


def fingerprint(values: Any) -> list[float]:
    """A cheap digest (float64 sums, in slices) to prove both workers built the same inputs and
    weights; a tuple of numbers contributes each of them."""
    out: list[float] = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(chunked.sum64(v))
        elif isinstance(v, (list, tuple)):
            out.extend(fingerprint(v))
        else:
            out.append(float(v))
    return out
