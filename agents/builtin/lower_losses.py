"""Norms, losses and einsum contractions, lowered into the ops the templates already know.

Norms are reductions with an elementwise prologue and epilogue (`torch.norm(x, p='fro')` is
sqrt(sum(x*x))). A loss is an elementwise term reduced as its `reduction` says; a mean divides by
the reduced extent at run time (the `rsize` node), never by a size baked at trace time, so stress
shapes stay right. `batchmean` (kl_div) is a mean over dim 0 of the per-sample sums. Piecewise terms
are written without branches: smooth L1 with m = min(|d|, beta) is 0.5 m^2 / beta + (|d| - m), which
is 0.5 d^2 / beta below beta and |d| - beta / 2 above, as torch defines it.
"""

from __future__ import annotations

import math
from typing import Any

import torch.fx
import torch.nn as nn

from kiln.agents.builtin.ir import Node
from kiln.agents.builtin.lower_types import Lowering, Ref
from kiln.agents.builtin.problem import Unsupported


def _x(x: Any, what: str) -> int:
    if not isinstance(x, Ref):
        raise Unsupported(f"{what} of a non-tensor")
    return x.idx


def _all(L: Lowering, x: int) -> tuple[int, ...]:
    return tuple(range(len(L.g.nodes[x].shape)))


def _dims(L: Lowering, x: int, dim: Any) -> tuple[int, ...]:
    nd = len(L.g.nodes[x].shape)
    if dim is None or dim == () or dim == []:
        return tuple(range(nd))
    ds = [dim] if isinstance(dim, int) else list(dim)
    if not all(isinstance(d, int) for d in ds):
        raise Unsupported("a norm dim that is not a constant int")
    return tuple(sorted({d % nd for d in ds}))


def _mean(L: Lowering, x: int, dims: tuple[int, ...], keepdim: bool = False) -> int:
    return L.g.op("div", L.g.reduce("sum", x, dims, keepdim), L.g.add(Node("rsize")))


def _reduced(L: Lowering, term: int, reduction: str, what: str, batch: bool = True) -> Ref:
    g = L.g
    if reduction == "none":
        return Ref(term)
    if reduction == "sum":
        return Ref(g.reduce("sum", term, _all(L, term), False))
    if reduction == "mean":
        return Ref(_mean(L, term, _all(L, term)))
    if reduction == "batchmean" and batch:
        rest = _all(L, term)[1:]
        per_sample = g.reduce("sum", term, rest, False) if rest else term
        return Ref(_mean(L, per_sample, (0,)))
    raise Unsupported(f"{what} with reduction={reduction!r}")


def _legacy(b: dict[str, Any], what: str) -> None:
    if b.get("size_average") is not None or b.get("reduce") is not None:
        raise Unsupported(f"{what} with the deprecated size_average/reduce arguments")
    if b.get("weight") is not None:
        raise Unsupported(f"{what} with a weight")


# ---------------------------------------------------------------------------- norms


def norm(L: Lowering, x: Any, p: Any, dim: Any, keepdim: bool, what: str) -> Ref:
    """The p-norm of x over dim (all dims when None): p in 2/'fro' (sqrt of the sum of squares), 1,
    inf and -inf, any other positive number (the sum of |x|^p to the 1/p)."""
    g = L.g
    i = _x(x, what)
    dims = _dims(L, i, dim)
    if p is None or p == "fro" or p == 2:
        return Ref(g.op("sqrt", g.reduce("sum", g.op("mul", i, i), dims, keepdim)))
    if isinstance(p, str | bool) or not isinstance(p, int | float):
        raise Unsupported(f"{what} with p={p!r}")
    a = g.op("abs", i)
    if p == 1:
        return Ref(g.reduce("sum", a, dims, keepdim))
    if p == math.inf:
        return Ref(g.reduce("max", a, dims, keepdim))
    if p == -math.inf:
        return Ref(g.reduce("min", a, dims, keepdim))
    if p > 0:  # |x|^p = exp(p log|x|): 0 stays 0, as in torch
        pw = g.op("exp", g.op("mul", g.op("log", a), g.const(float(p))))
        s = g.reduce("sum", pw, dims, keepdim)
        return Ref(g.op("exp", g.op("mul", g.op("log", s), g.const(1.0 / float(p)))))
    raise Unsupported(f"{what} with p={p!r}")


def norm_op(L: Lowering, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
    if b.get("dtype") is not None or b.get("out") is not None:
        raise Unsupported(f"{name} with a dtype or out argument")
    p = b["ord"] if name == "vector_norm" else b["p"]
    return norm(L, b["input"], p, b["dim"], bool(b["keepdim"]), name)


# ---------------------------------------------------------------------------- losses


def smooth_l1(L: Lowering, pred: Any, target: Any, beta: float, reduction: str, huber: bool = False) -> Ref:
    """smooth_l1_loss (beta) and huber_loss (delta = beta: the same curve times delta)."""
    g = L.g
    what = "huber_loss" if huber else "smooth_l1_loss"
    if beta < 0:
        raise Unsupported(f"{what} with a negative beta")
    a = g.op("abs", g.op("sub", _x(pred, what), _x(target, what)))
    if beta == 0:
        term = a
    else:
        m = g.op("clamp_max", a, params=(float(beta),))
        sq = g.op("mul", g.op("mul", m, m), g.const(0.5 if huber else 0.5 / float(beta)))
        lin = g.op("sub", a, m)
        term = g.op("add", sq, g.op("mul", lin, g.const(float(beta))) if huber else lin)
    return _reduced(L, term, reduction, what, batch=False)


def kl_div(L: Lowering, inp: Any, target: Any, reduction: str, log_target: bool) -> Ref:
    """torch's pointwise KL term: target * (log(target) - input), with 0 where target is 0 (xlogy);
    exp(target) * (target - input) for a log target."""
    g = L.g
    i, t = _x(inp, "kl_div"), _x(target, "kl_div")
    if log_target:
        term = g.op("mul", g.op("exp", t), g.op("sub", t, i))
    else:
        term = g.op("sub", g.op("xlogx", t), g.op("mul", t, i))
    return _reduced(L, term, reduction, "kl_div")


def _distance(L: Lowering, a: int, b: int, p: float, eps: float, what: str) -> int:
    """pairwise_distance: the p-norm of a - b + eps over the last dim."""
    g = L.g
    d = g.op("add", g.op("sub", a, b), g.const(float(eps)))
    return norm(L, Ref(d), p, -1, False, what).idx


def triplet(L: Lowering, anchor: Any, pos: Any, neg: Any, margin: float, p: float, eps: float, swap: bool,
            reduction: str) -> Ref:
    g = L.g
    what = "triplet_margin_loss"
    a, pp, nn_ = _x(anchor, what), _x(pos, what), _x(neg, what)
    if not (len(g.nodes[a].shape) == len(g.nodes[pp].shape) == len(g.nodes[nn_].shape) >= 1):
        raise Unsupported(f"{what} of inputs with different ranks")
    d_pos = _distance(L, a, pp, p, eps, what)
    d_neg = _distance(L, a, nn_, p, eps, what)
    if swap:
        d_neg = g.op("minimum", d_neg, _distance(L, pp, nn_, p, eps, what))
    term = g.op("relu", g.op("add", g.op("sub", d_pos, d_neg), g.const(float(margin))))
    return _reduced(L, term, reduction, what, batch=False)


def loss_op(L: Lowering, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
    _legacy(b, name)
    if name == "smooth_l1_loss":
        return smooth_l1(L, b["input"], b["target"], float(b["beta"]), b["reduction"])
    if name == "huber_loss":
        return smooth_l1(L, b["input"], b["target"], float(b["delta"]), b["reduction"], huber=True)
    if name == "kl_div":
        return kl_div(L, b["input"], b["target"], b["reduction"], bool(b["log_target"]))
    if name == "mse_loss":
        d = L.g.op("sub", _x(b["input"], name), _x(b["target"], name))
        return _reduced(L, L.g.op("mul", d, d), b["reduction"], name, batch=False)
    if name == "l1_loss":
        d = L.g.op("abs", L.g.op("sub", _x(b["input"], name), _x(b["target"], name)))
        return _reduced(L, d, b["reduction"], name, batch=False)
    if name == "triplet_margin_loss":
        return triplet(L, b["anchor"], b["positive"], b["negative"], float(b["margin"]), float(b["p"]),
                       float(b["eps"]), bool(b["swap"]), b["reduction"])
    raise Unsupported(f"op `{name}`")


def loss_module(L: Lowering, mod: nn.Module, args: list[Any]) -> Any:
    """nn loss modules called with their inputs (two, or three for TripletMarginLoss); None if mod
    is not one of them."""
    r = getattr(mod, "reduction", "mean")
    if isinstance(mod, nn.TripletMarginLoss) and len(args) == 3:
        return triplet(L, *args, float(mod.margin), float(mod.p), float(mod.eps), bool(mod.swap), r)
    if len(args) != 2:
        return None
    if isinstance(mod, nn.SmoothL1Loss):
        return smooth_l1(L, args[0], args[1], float(mod.beta), r)
    if isinstance(mod, nn.HuberLoss):
        return smooth_l1(L, args[0], args[1], float(mod.delta), r, huber=True)
    if isinstance(mod, nn.KLDivLoss):
        return kl_div(L, args[0], args[1], r, bool(mod.log_target))
    if isinstance(mod, nn.CrossEntropyLoss):
        from kiln.agents.builtin.lower_crossent import crossent_module

        return crossent_module(L, mod, args)
    if isinstance(mod, nn.MSELoss | nn.L1Loss):
        name = "mse_loss" if isinstance(mod, nn.MSELoss) else "l1_loss"
        return loss_op(L, name, {"input": args[0], "target": args[1], "reduction": r}, None)  # type: ignore[arg-type]
    return None


# ---------------------------------------------------------------------------- einsum


def einsum_op(L: Lowering, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
    """A contraction of A's last index with B's first, B 2-D (`bijl,lk->bijk`, `ij,jk->ik`): the
    matmul (..., K) x (K, N); or a batched one (`bij,bjk->bik`). Other equations are refused by name."""
    eq = b["equation"]
    if not isinstance(eq, str) or b["b"] is None or b.get("c") is not None:
        raise Unsupported("einsum other than two operands and an equation string")
    spec = eq.replace(" ", "")
    ins, _, out = spec.partition("->")
    parts = ins.split(",")
    if "->" not in spec or len(parts) != 2 or "." in spec:
        raise Unsupported(f"einsum {eq!r}")
    sa, sb = parts
    bmm = (len(sa) == len(sb) == 3 and len(set(sa + sb[2])) == 4 and sa[0] == sb[0] and sa[2] == sb[1]
           and out == sa[:2] + sb[2])  # 'bij,bjk->bik'
    ok = bmm or (len(sb) == 2 and len(sa) >= 2 and len(set(sa)) == len(sa) and sa[-1] == sb[0] and sb[1] not in sa
                 and out == sa[:-1] + sb[1])
    if not ok:
        raise Unsupported(f"einsum {eq!r} (covered: a contraction of the first operand's last index with a "
                          "matrix's first, e.g. 'bijl,lk->bijk', or 'bij,bjk->bik')")
    return L._k_matmul("matmul", {"input": b["a"], "other": b["b"]}, n)
