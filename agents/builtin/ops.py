"""Elementwise ops the templates know: each turns argument expressions into a Triton expression.
All math is in fp32 (loads are upcast); results are cast to the output dtype at the store."""

from __future__ import annotations

from collections.abc import Callable

Expr = Callable[[list[str], tuple[float, ...]], str]


def _tanh(a: str) -> str:
    # tl has no tanh in every Triton release: tanh(a) = 2*sigmoid(2a) - 1 (abs error < 1e-7)
    return f"(2.0 * tl.sigmoid(2.0 * {a}) - 1.0)"


def _softplus(a: str, beta: float, threshold: float) -> str:
    return f"tl.where({a} * {beta!r} > {threshold!r}, {a}, tl.log(1.0 + tl.exp({a} * {beta!r})) / {beta!r})"


def _clamp(a: str, lo: float | None, hi: float | None) -> str:
    out = a if lo is None else f"tl.maximum({a}, {lo!r})"
    return out if hi is None else f"tl.minimum({out}, {hi!r})"


GELU_K = 0.7071067811865476
GELU_T = 0.7978845608028654
SELU_A = 1.6732632423543772
SELU_S = 1.0507009873554805

OPS: dict[str, Expr] = {
    "add": lambda a, p: f"({a[0]} + {a[1]})",
    "sub": lambda a, p: f"({a[0]} - {a[1]})",
    "mul": lambda a, p: f"({a[0]} * {a[1]})",
    "div": lambda a, p: f"({a[0]} / {a[1]})",
    "maximum": lambda a, p: f"tl.maximum({a[0]}, {a[1]})",
    "minimum": lambda a, p: f"tl.minimum({a[0]}, {a[1]})",
    "neg": lambda a, p: f"(-{a[0]})",
    "abs": lambda a, p: f"tl.abs({a[0]})",
    "exp": lambda a, p: f"tl.exp({a[0]})",
    "log": lambda a, p: f"tl.log({a[0]})",
    "sqrt": lambda a, p: f"tl.sqrt({a[0]})",
    "rsqrt": lambda a, p: f"tl.rsqrt({a[0]})",
    "sin": lambda a, p: f"tl.sin({a[0]})",
    "cos": lambda a, p: f"tl.cos({a[0]})",
    "erf": lambda a, p: f"tl.erf({a[0]})",
    "square": lambda a, p: f"({a[0]} * {a[0]})",
    "reciprocal": lambda a, p: f"(1.0 / {a[0]})",
    "powi": lambda a, p: "(" + " * ".join([a[0]] * int(p[0])) + ")",
    "sigmoid": lambda a, p: f"tl.sigmoid({a[0]})",
    "tanh": lambda a, p: _tanh(a[0]),
    "relu": lambda a, p: f"tl.maximum({a[0]}, 0.0)",
    "gelu": lambda a, p: f"(0.5 * {a[0]} * (1.0 + tl.erf({a[0]} * {GELU_K!r})))",
    "gelu_tanh": lambda a, p: (
        f"(0.5 * {a[0]} * (1.0 + {_tanh(f'({GELU_T!r} * ({a[0]} + 0.044715 * {a[0]} * {a[0]} * {a[0]}))')}))"
    ),
    "silu": lambda a, p: f"({a[0]} * tl.sigmoid({a[0]}))",
    "leaky_relu": lambda a, p: f"tl.where({a[0]} > 0.0, {a[0]}, {a[0]} * {p[0]!r})",
    "elu": lambda a, p: f"tl.where({a[0]} > 0.0, {a[0]}, {p[0]!r} * (tl.exp({a[0]}) - 1.0))",
    "selu": lambda a, p: f"({SELU_S!r} * tl.where({a[0]} > 0.0, {a[0]}, {SELU_A!r} * (tl.exp({a[0]}) - 1.0)))",
    "softplus": lambda a, p: _softplus(a[0], p[0], p[1]),
    "clamp": lambda a, p: _clamp(a[0], p[0], p[1]),
    "clamp_min": lambda a, p: _clamp(a[0], p[0], None),
    "clamp_max": lambda a, p: _clamp(a[0], None, p[0]),
    "hardsigmoid": lambda a, p: _clamp(f"({a[0]} / 6.0 + 0.5)", 0.0, 1.0),
    "hardswish": lambda a, p: f"({a[0]} * {_clamp(f'({a[0]} + 3.0)', 0.0, 6.0)} / 6.0)",
    "mish": lambda a, p: f"({a[0]} * {_tanh(_softplus(a[0], 1.0, 20.0))})",
    "softsign": lambda a, p: f"({a[0]} / (1.0 + tl.abs({a[0]})))",
    "xlogx": lambda a, p: f"tl.where({a[0]} == 0.0, 0.0, {a[0]} * tl.log({a[0]}))",  # torch.xlogy(a, a)
    # the matmul epilogue's own (row, column) indices rm2, rn2 (classify keeps these ops there)
    "triu": lambda a, p: f"tl.where(rn2 - rm2 >= {int(p[0])}, {a[0]}, 0.0)",
    "tril": lambda a, p: f"tl.where(rn2 - rm2 <= {int(p[0])}, {a[0]}, 0.0)",
}


def render(name: str, args: list[str], params: tuple[float, ...]) -> str:
    return OPS[name](args, params)
