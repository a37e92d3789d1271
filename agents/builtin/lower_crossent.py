"""Cross-entropy with class-index targets as a DAG node: `F.cross_entropy(x, t)` and
`nn.CrossEntropyLoss()(x, t)`, x (N, C) floating and t (N,) integer class indices.

The node is `Node("xent", op=reduction, args=(x, t), params=(ignore_index,))`, reduction "mean",
"sum" or "none". Its target is the only place an integer forward input may go: the kernel loads it
as an integer, never through fp32 (which holds integers exactly only to 2**24). The Lowerer calls
`check_integer_inputs` on the fx graph before lowering anything, so an integer input read by any other op
(`t.float()`, `x + t`, `t.shape`) is refused by name, and so is any op on such a loss's result:
the pipeline then never has to cut an integer tensor or hand the loss to another stage.
Covered: no weight, no label smoothing, the deprecated size_average/reduce unset; everything else
(probability targets, the K-dim (N, C, d1, ...) form) is refused by name."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from kiln.agents.builtin import lower_tables as T
from kiln.agents.builtin.ir import Node
from kiln.agents.builtin.lower_types import NOT_MINE, Lowering, Ref, ref_of
from kiln.agents.builtin.problem import Unsupported

SIG: T.Sig = (("input", T.REQ), ("target", T.REQ), ("weight", None), ("size_average", None), ("ignore_index", -100),
              ("reduce", None), ("reduction", "mean"), ("label_smoothing", 0.0))  # fmt: skip
REDUCTIONS = ("mean", "sum", "none")


def crossent_call(L: Lowering, key: Any, args: list[Any], kwargs: dict[str, Any], n: torch.fx.Node) -> Any:
    """lower_extra's hook: F.cross_entropy."""
    if key is not F.cross_entropy:
        return NOT_MINE
    b = T.bind(SIG, args, kwargs, "cross_entropy")
    if b["size_average"] is not None or b["reduce"] is not None:
        raise Unsupported("cross_entropy with the deprecated size_average/reduce arguments")
    return crossent(L, b["input"], b["target"], b["weight"], b["ignore_index"], b["reduction"], b["label_smoothing"])


def crossent_module(L: Lowering, mod: nn.CrossEntropyLoss, args: list[Any]) -> Ref:
    """lower_losses.loss_module's hook: an nn.CrossEntropyLoss called with (input, target)."""
    return crossent(L, args[0], args[1], mod.weight, mod.ignore_index, mod.reduction, mod.label_smoothing)


def crossent(L: Lowering, x: Any, t: Any, weight: Any, ignore: Any, reduction: Any, smoothing: Any) -> Ref:
    """The xent node of x (N, C) and class indices t (N,); its shape as torch's (N,) or ()."""
    if weight is not None:
        raise Unsupported("cross_entropy with a class weight (covered: weight=None)")
    if isinstance(smoothing, Ref) or float(smoothing) != 0.0:
        raise Unsupported(f"cross_entropy with label_smoothing={smoothing!r} (covered: 0.0)")
    if reduction not in REDUCTIONS:
        raise Unsupported(f"cross_entropy with reduction={reduction!r}")
    if isinstance(ignore, bool) or not isinstance(ignore, int):
        raise Unsupported(f"cross_entropy with ignore_index={ignore!r} (covered: a constant int)")
    xi, ti = ref_of(x, "cross_entropy"), ref_of(t, "cross_entropy's target")
    tn = L.g.nodes[ti]
    if tn.kind != "load" or L.g.inputs[tn.input].expr not in L.p.integers:
        raise Unsupported("cross_entropy with a floating (probability) target (covered: integer class indices "
                          "given as a forward input)")  # fmt: skip
    xs, ts = L.g.nodes[xi].shape, tn.shape
    if len(xs) != 2 or ts != xs[:1]:
        raise Unsupported(f"cross_entropy of input {list(xs)} and target {list(ts)} (covered: (N, C) and (N,))")
    out = xs[:1] if reduction == "none" else ()
    return Ref(L.g.add(Node("xent", op=reduction, args=(xi, ti), params=(float(ignore),), shape=out)))


# ---------------------------------------------------------------------------- fx-level rule


def _is_crossent(gm: torch.fx.GraphModule, u: torch.fx.Node) -> bool:
    if u.op == "call_function":
        return u.target is F.cross_entropy
    return u.op == "call_module" and isinstance(gm.get_submodule(str(u.target)), nn.CrossEntropyLoss)


def _as_target(u: torch.fx.Node, p: torch.fx.Node) -> bool:
    """p is u's target (second positional or `target=`) and nothing else of u."""
    named = [v for k, v in u.kwargs.items() if k != "target"]
    target = u.args[1] if len(u.args) > 1 else u.kwargs.get("target")
    return target is p and p is not u.args[0] and p not in named and list(u.args).count(p) <= 1


def check_integer_inputs(gm: torch.fx.GraphModule, names: tuple[str, ...]) -> None:
    """Refuse, by name, every read of an integer forward input but as a cross-entropy target, and
    any op on such a cross-entropy's result (covered: returning it)."""
    for p in gm.graph.nodes:
        if p.op != "placeholder" or str(p.target) not in names:
            continue
        if not all(_is_crossent(gm, u) and _as_target(u, p) for u in p.users):
            raise Unsupported(f"an op on the integer input `{p.target}` (covered: as cross_entropy's "
                              "class-index target)")  # fmt: skip
        for u in p.users:
            if any(w.op != "output" for w in u.users):
                raise Unsupported("an op on cross_entropy's result (covered: returning it)")
