"""Plan a chain of ops over symbolic shapes: which sizes, inputs and weights a module needs.

A size is a `Sym`: a Python expression over the module's size constants and its value, so a
stress variant that changes the constants keeps `Model`, `get_inputs` and `get_init_inputs`
consistent. `plan_chain` returns None when the ops cannot be composed at any rank or size.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from kiln.agents.curriculum.catalogue import OpSpec, Scalar


@dataclass(frozen=True)
class Sym:
    expr: str
    value: int


@dataclass(frozen=True)
class Profile:
    """Sizes a module draws from, per device (the CPU runs Triton's interpreter: keep it small)."""

    batch: tuple[int, ...]
    dims: tuple[int, ...]
    seq: tuple[int, ...]
    spatial: tuple[int, ...]
    channels: tuple[int, ...]
    max_numel: int


PROFILES = {
    "cpu": Profile(batch=(2, 3, 4), dims=(17, 33, 48, 64, 97), seq=(8, 13, 16), spatial=(8, 11, 16),
                   channels=(3, 4, 8), max_numel=1 << 16),
    "cuda": Profile(batch=(8, 16, 32), dims=(255, 512, 1000, 1024, 2047, 4096), seq=(128, 256, 500),
                    spatial=(28, 56, 64), channels=(16, 32, 64), max_numel=1 << 24),
}


@dataclass
class Step:
    """One op, its drawn args and what it adds to the module."""

    index: int
    op: OpSpec
    values: dict[str, Scalar]
    init_sizes: dict[str, Sym] = field(default_factory=dict)
    extra_input: tuple[str, list[Sym], str] | None = None  # (name, shape, "rand" | "index:<high expr>")
    out_shape: list[Sym] = field(default_factory=list)


@dataclass
class Chain:
    constants: dict[str, int]
    input_shape: list[Sym]
    steps: list[Step]


class _Planner:
    def __init__(self, rng: random.Random, profile: Profile, max_numel: int) -> None:
        self.rng, self.profile, self.max_numel = rng, profile, min(max_numel, profile.max_numel)
        self.constants: dict[str, int] = {}

    def const(self, name: str, pool: tuple[int, ...]) -> Sym:
        value = self.rng.choice(pool)
        self.constants[name] = value
        return Sym(name, value)

    def initial(self, rank: int) -> list[Sym]:
        p = self.profile
        if rank == 4:
            return [self.const("batch", p.batch), self.const("channels", p.channels),
                    self.const("height", p.spatial), self.const("width", p.spatial)]
        last = [self.const("features", p.dims)]
        return ([self.const("batch", p.batch)] if rank >= 2 else []) + \
            ([self.const("seq", p.seq)] if rank == 3 else []) + last

    def fits(self, shape: list[Sym]) -> bool:
        n = 1
        for s in shape:
            n *= s.value
        return 1 <= n <= self.max_numel and all(s.value >= 1 for s in shape)


def _dim_ok(values: dict[str, Scalar], rank: int) -> bool:
    dim = values.get("dim")
    return not isinstance(dim, int) or isinstance(dim, bool) or -rank <= dim < rank


def _window(size: Sym, k: int, stride: int, pad: int) -> Sym:
    expr = f"({size.expr} + {2 * pad} - {k}) // {stride} + 1" if pad else f"({size.expr} - {k}) // {stride} + 1"
    return Sym(expr, (size.value + 2 * pad - k) // stride + 1)


def _step(pl: _Planner, i: int, op: OpSpec, shape: list[Sym]) -> Step | None:
    """Apply one op to `shape`; None when it does not fit."""
    lo, hi = op.ranks()
    values = {k: pl.rng.choice(v) for k, v in op.args.items()}
    if not lo <= len(shape) <= hi or not _dim_ok(values, len(shape)):
        return None
    st = Step(index=i, op=op, values=values)
    out = list(shape)
    if op.kind == "binary":
        st.extra_input = (f"y{i}", list(shape), "rand")
    elif op.kind == "reduce":
        d = int(values["dim"]) % len(shape)
        out = out[:d] + ([Sym("1", 1)] if values.get("keepdim") else []) + out[d + 1:]
    elif op.kind == "project":
        out[-1] = pl.const(f"out{i}", pl.profile.dims)
    elif op.kind == "bmm":
        new = pl.const(f"out{i}", pl.profile.dims)
        st.extra_input = (f"y{i}", [shape[0], shape[2], new], "rand")
        out[-1] = new
    elif op.kind in ("conv2d", "pool2d"):
        if op.kind == "conv2d":
            out[1] = pl.const(f"out{i}", pl.profile.channels)
        k, s, p = (int(values.get(n, 0)) for n in ("kernel_size", "stride", "padding"))
        out[2], out[3] = _window(shape[2], k, s, p), _window(shape[3], k, s, p)
    elif op.kind == "gather":
        half = Sym(f"max(1, {shape[-1].expr} // 2)", max(1, shape[-1].value // 2))
        out[-1] = half
        st.extra_input = (f"idx{i}", list(out), f"index:{shape[-1].expr}")
    elif op.kind == "scores":
        out[-1] = shape[-2]
    st.init_sizes = {"features": shape[-1], "channels": shape[min(1, len(shape) - 1)],
                     "out": out[1] if op.kind == "conv2d" else out[-1]}
    st.out_shape = out
    return st if pl.fits(out) and (st.extra_input is None or pl.fits(st.extra_input[1])) else None


def plan_chain(ops: list[OpSpec], rng: random.Random, profile: Profile, max_numel: int) -> Chain | None:
    """Compose `ops` in order at the first rank (tried in random order) where every op fits."""
    lo, hi = ops[0].ranks()
    ranks = [r for r in range(lo, hi + 1) if r != 1 or hi == 1]
    rng.shuffle(ranks)
    for rank in ranks:
        pl = _Planner(rng, profile, max_numel)
        shape = initial = pl.initial(rank)
        if not pl.fits(shape):
            continue
        steps: list[Step] = []
        for i, op in enumerate(ops, start=1):
            st = _step(pl, i, op, shape)
            if st is None:
                break
            steps.append(st)
            shape = st.out_shape
        else:
            return Chain(constants=pl.constants, input_shape=initial, steps=steps)
    return None
