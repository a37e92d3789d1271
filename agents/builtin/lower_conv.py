"""Convolutions, transposed convolutions, pooling, attention and batch/instance norm as DAG nodes.

Every spatial op is stored as if it were 3-D (depth, height, width): a 1-D op has depth = height
= 1, a 2-D op depth = 1, and the generated forward views its tensors that way. Parameters are
read at trace time and baked into the kernel's launch, like `self.eps` elsewhere; sizes are read
at run time. The data inputs of these ops are materialized (a kernel of their own writes them):
no family here fuses a prologue."""

from __future__ import annotations

from typing import Any, cast

import torch
import torch.fx
import torch.nn as nn

from kiln.agents.builtin import lower_tables as T
from kiln.agents.builtin.ir import Node
from kiln.agents.builtin.lower_types import Lowering, Ref, materialize, out_shape, ref_of
from kiln.agents.builtin.problem import Unsupported

REQ = T.REQ
CONV: T.Sig = (("input", REQ), ("weight", REQ), ("bias", None), ("stride", 1), ("padding", 0), ("dilation", 1),
               ("groups", 1))  # fmt: skip
CONVT: T.Sig = (("input", REQ), ("weight", REQ), ("bias", None), ("stride", 1), ("padding", 0),
                ("output_padding", 0), ("groups", 1), ("dilation", 1))  # fmt: skip
MAXP: T.Sig = (("input", REQ), ("kernel_size", REQ), ("stride", None), ("padding", 0), ("dilation", 1),
               ("ceil_mode", False), ("return_indices", False))  # fmt: skip
AVGP: T.Sig = (("input", REQ), ("kernel_size", REQ), ("stride", None), ("padding", 0), ("ceil_mode", False),
               ("count_include_pad", True), ("divisor_override", None))  # fmt: skip
ADAP: T.Sig = (("input", REQ), ("output_size", REQ), ("return_indices", False))
SDPA: T.Sig = (("query", REQ), ("key", REQ), ("value", REQ), ("attn_mask", None), ("dropout_p", 0.0),
               ("is_causal", False), ("scale", None), ("enable_gqa", False))  # fmt: skip

SIGS: dict[str, T.Sig] = {"scaled_dot_product_attention": SDPA}
for _d in (1, 2, 3):
    SIGS |= {f"conv{_d}d": CONV, f"conv_transpose{_d}d": CONVT, f"max_pool{_d}d": MAXP, f"avg_pool{_d}d": AVGP,
             f"adaptive_avg_pool{_d}d": ADAP, f"adaptive_max_pool{_d}d": ADAP}  # fmt: skip


def triple(v: Any, nsp: int, fill: int, what: str) -> tuple[int, ...]:
    """A per-dim parameter (int or tuple of nsp) as 3 ints, the missing leading dims set to `fill`."""
    vals = [v] * nsp if isinstance(v, int) else list(v)
    if len(vals) == 1 and nsp > 1:
        vals = vals * nsp
    if len(vals) != nsp or not all(isinstance(a, int) and not isinstance(a, bool) for a in vals):
        raise Unsupported(f"{what} {v!r} for a {nsp}-D op")
    return (fill,) * (3 - nsp) + tuple(int(a) for a in vals)


def _bias(L: Lowering, y: int, bias: Any, nsp: int) -> int:
    """y + bias viewed as (C, 1, ..., 1): an epilogue input along the channel dim."""
    if bias is None:
        return y
    bi = ref_of(bias, "conv bias")
    if L.g.nodes[bi].kind != "load":
        raise Unsupported("a conv bias computed in forward")
    expr = L.g.inputs[L.g.nodes[bi].input].expr
    c = L.g.nodes[bi].shape[0]
    return L.g.op("add", y, L.g.load(f"{expr}.view(-1{', 1' * nsp})", (c,) + (1,) * nsp))


def _padding(pad: Any, w_shape: tuple[int, ...], dil: tuple[int, ...], stride: tuple[int, ...], nsp: int) -> tuple[int, ...]:
    if pad == "valid":
        return (0, 0, 0)
    if pad == "same":
        ks = (1,) * (3 - nsp) + tuple(w_shape[2:])
        total = [d * (k - 1) for d, k in zip(dil, ks, strict=True)]
        if any(t % 2 for t in total) or any(s != 1 for s in stride):
            raise Unsupported("padding='same' that pads one side more than the other")
        return tuple(t // 2 for t in total)
    return triple(pad, nsp, 0, "padding")


def conv(L: Lowering, b: dict[str, Any], nsp: int, transposed: bool, n: torch.fx.Node) -> Any:
    x = materialize(L, ref_of(b["input"], "conv input"))
    w = ref_of(b["weight"], "conv weight")
    if L.g.nodes[w].kind != "load":
        w = materialize(L, w)
    if len(L.g.nodes[x].shape) != nsp + 2:
        raise Unsupported(f"a {nsp}-D convolution of an unbatched or {len(L.g.nodes[x].shape)}-D input")
    stride, dil = triple(b["stride"], nsp, 1, "stride"), triple(b["dilation"], nsp, 1, "dilation")
    pad = _padding(b["padding"], L.g.nodes[w].shape, dil, stride, nsp)
    opad = triple(b.get("output_padding", 0), nsp, 0, "output_padding")
    groups = b["groups"]
    if not isinstance(groups, int) or groups < 1:
        raise Unsupported(f"conv groups {groups!r}")
    params = (float(nsp), float(transposed), float(groups), *map(float, stride + pad + dil + opad))
    node = Node("conv", op="conv_transpose" if transposed else "conv", args=(x, w), params=params,
                shape=out_shape(n))  # fmt: skip
    return Ref(_bias(L, L.g.add(node), b["bias"], nsp))


def _pool_params(b: dict[str, Any], nsp: int, kind: str) -> tuple[float, ...]:
    k = triple(b["kernel_size"], nsp, 1, "kernel_size")
    s = k if b["stride"] in (None, [], ()) else triple(b["stride"], nsp, 1, "stride")
    p = triple(b["padding"], nsp, 0, "padding")
    d = triple(b.get("dilation", 1), nsp, 1, "dilation")
    div = b.get("divisor_override") or 0
    cip = b.get("count_include_pad", True)
    return (float(nsp), *map(float, k + s + p + d), float(bool(b["ceil_mode"])), float(bool(cip)), float(div))


def pool(L: Lowering, b: dict[str, Any], nsp: int, kind: str, n: torch.fx.Node) -> Any:
    if b.get("return_indices"):
        raise Unsupported("pooling with return_indices=True (forward returns several values)")
    x = materialize(L, ref_of(b["input"], "pooling input"))
    if len(L.g.nodes[x].shape) not in (nsp + 1, nsp + 2):
        raise Unsupported(f"{nsp}-D pooling of a {len(L.g.nodes[x].shape)}-D input")
    node = Node("pool", op=kind, args=(x,), params=_pool_params(b, nsp, kind), shape=out_shape(n))
    return Ref(L.g.add(node))


def adaptive(L: Lowering, b: dict[str, Any], nsp: int, kind: str, n: torch.fx.Node) -> Any:
    if b.get("return_indices"):
        raise Unsupported("adaptive pooling with return_indices=True (forward returns several values)")
    xi = ref_of(b["input"], "pooling input")
    shape = L.g.nodes[xi].shape
    out = out_shape(n)
    if all(v == 1 for v in out[-nsp:]):  # a global pool: a mean / max over the trailing dims
        red = "mean" if kind == "adaptive_avg" else "amax"
        dims = tuple(range(len(shape) - nsp, len(shape)))
        return L._k_reduce(red, {"input": b["input"], "dim": dims, "keepdim": True, "dtype": None}, n)
    x = materialize(L, xi)
    params = (float(nsp), *map(float, (1,) * (3 - nsp) + tuple(out[-nsp:])))
    return Ref(L.g.add(Node("pool", op=kind, args=(x,), params=params, shape=out)))


def sdpa(L: Lowering, b: dict[str, Any], n: torch.fx.Node) -> Any:
    if b["attn_mask"] is not None or float(b["dropout_p"]) != 0.0 or b["enable_gqa"]:
        raise Unsupported("scaled_dot_product_attention with a mask, dropout or grouped-query heads")
    q, k, v = (materialize(L, ref_of(b[a], "attention operand")) for a in ("query", "key", "value"))
    sq, sk, sv = (L.g.nodes[i].shape for i in (q, k, v))
    if len(sq) < 2 or sq[:-2] != sk[:-2] or sk[:-1] != sv[:-1] or sq[-1] != sk[-1]:
        raise Unsupported(f"attention of shapes {list(sq)}, {list(sk)}, {list(sv)} (covered: (..., S, D), same batch dims)")
    scale = b["scale"]
    params = (float(bool(b["is_causal"])), float(scale) if scale is not None else 0.0)
    return Ref(L.g.add(Node("attn", op="sdpa", args=(q, k, v), params=params, shape=out_shape(n))))


def _fn(name: str):
    nsp = int(name[-2]) if name[-1] == "d" and name[-2].isdigit() else 0
    if name.startswith("conv_transpose"):
        return lambda L, nm, b, n: conv(L, b, nsp, True, n)
    if name.startswith("conv"):
        return lambda L, nm, b, n: conv(L, b, nsp, False, n)
    if name.startswith("adaptive"):
        kind = "adaptive_avg" if "avg" in name else "adaptive_max"
        return lambda L, nm, b, n: adaptive(L, b, nsp, kind, n)
    if "pool" in name:
        kind = "max" if name.startswith("max") else "avg"
        return lambda L, nm, b, n: pool(L, b, nsp, kind, n)
    return lambda L, nm, b, n: sdpa(L, b, n)


FUNCS = {name: _fn(name) for name in SIGS}
for _d in (1, 2, 3):  # F.max_pool*d(..., return_indices=True) traces to these
    SIGS[f"max_pool{_d}d_with_indices"] = MAXP
    FUNCS[f"max_pool{_d}d_with_indices"] = lambda L, nm, b, n: pool(L, b | {"return_indices": True}, 0, "max", n)

MODULES: list[tuple[type, str]] = [
    (nn.Conv1d, "conv1d"), (nn.Conv2d, "conv2d"), (nn.Conv3d, "conv3d"),
    (nn.ConvTranspose1d, "conv_transpose1d"), (nn.ConvTranspose2d, "conv_transpose2d"),
    (nn.ConvTranspose3d, "conv_transpose3d"),
    (nn.MaxPool1d, "max_pool1d"), (nn.MaxPool2d, "max_pool2d"), (nn.MaxPool3d, "max_pool3d"),
    (nn.AvgPool1d, "avg_pool1d"), (nn.AvgPool2d, "avg_pool2d"), (nn.AvgPool3d, "avg_pool3d"),
    (nn.AdaptiveAvgPool1d, "adaptive_avg_pool1d"), (nn.AdaptiveAvgPool2d, "adaptive_avg_pool2d"),
    (nn.AdaptiveAvgPool3d, "adaptive_avg_pool3d"), (nn.AdaptiveMaxPool1d, "adaptive_max_pool1d"),
    (nn.AdaptiveMaxPool2d, "adaptive_max_pool2d"), (nn.AdaptiveMaxPool3d, "adaptive_max_pool3d"),
]  # fmt: skip


def _module_args(L: Lowering, mod: nn.Module, path: str, x: Any, name: str) -> dict[str, Any]:
    if name.startswith("conv"):
        if getattr(mod, "padding_mode", "zeros") != "zeros":
            raise Unsupported(f"convolution with padding_mode={mod.padding_mode!r}")
        weight, bias_t = cast(torch.Tensor, mod.weight), cast("torch.Tensor | None", mod.bias)  # nn.Module types them loosely
        w = Ref(L.g.load(f"self.{path}.weight", tuple(weight.shape)))
        bias = None if bias_t is None else Ref(L.g.load(f"self.{path}.bias", tuple(bias_t.shape)))
        keys = ("stride", "padding", "dilation", "groups") + (("output_padding",) if "transpose" in name else ())
        return {"input": x, "weight": w, "bias": bias} | {k: getattr(mod, k) for k in keys}
    names = [k for k, _ in SIGS[name][1:]]
    return {"input": x} | {k: getattr(mod, k) for k in names if hasattr(mod, k)}


def lower_module(L: Lowering, mod: nn.Module, path: str, x: Any, n: torch.fx.Node) -> Any:
    for cls, name in MODULES:
        if type(mod) is cls:
            return FUNCS[name](L, name, _module_args(L, mod, path, x, name), n)
    from kiln.agents.builtin.lower_norms import norm_module

    return norm_module(L, mod, path, x, n)
