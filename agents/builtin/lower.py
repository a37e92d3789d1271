"""Lower a traced Model (torch.fx) into the kernel DAG (`ir.KGraph`), or say what is not covered.

Composite ops are decomposed here: softmax = max, exp, sum, div; layer_norm = two sums; mean =
sum / R. The templates then only know loads, elementwise ops, reductions and one matmul."""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx
import torch.nn as nn

from kiln.agents.builtin import lower_tables as T
from kiln.agents.builtin.ir import KGraph, Node
from kiln.agents.builtin.lower_types import NOT_MINE, MaxPair, Ref, ShapeInt, TView
from kiln.agents.builtin.problem import Problem, Unsupported


def _shape(n: torch.fx.Node) -> tuple[int, ...]:
    meta = n.meta.get("tensor_meta")
    return tuple(meta.shape) if meta is not None and hasattr(meta, "shape") else ()


def _name(target: Any) -> str:
    return getattr(target, "__name__", str(target))


class Lowerer:
    def __init__(self, p: Problem) -> None:
        self.p, self.g = p, KGraph()
        self.env: dict[torch.fx.Node, Any] = {}

    def run(self) -> KGraph:
        if self.p.integers:  # integer inputs may only be cross-entropy targets
            from kiln.agents.builtin.lower_crossent import check_integer_inputs

            check_integer_inputs(self.p.gm, self.p.integers)
        for n in self.p.gm.graph.nodes:
            if n.op == "output":
                return self._output(n)
            self.env[n] = self._node(n)
        raise Unsupported("the traced graph has no output")

    def _output(self, n: torch.fx.Node) -> KGraph:
        out = n.args[0]
        if not isinstance(out, torch.fx.Node):
            raise Unsupported("forward returns several values (only one tensor output is covered)")
        ref = self.env[out]
        if not isinstance(ref, Ref):
            raise Unsupported("forward does not return a computed tensor")
        self.g.out, self.g.out_shape = ref.idx, _shape(out)
        return self.g

    def _node(self, n: torch.fx.Node) -> Any:
        if n.op == "placeholder":
            name = str(n.target)
            return Ref(self.g.load(name, _shape(n), scalar=name in self.p.scalars))
        if n.op == "get_attr":
            return self._attr(n)
        args = torch.fx.node.map_arg(n.args, lambda a: self.env[a])
        kwargs = torch.fx.node.map_arg(n.kwargs, lambda a: self.env[a])
        if n.op == "call_module":
            return self._module(self.p.gm.get_submodule(str(n.target)), str(n.target), args, kwargs, n)
        key = n.target if n.op == "call_function" else f".{n.target}"
        return self._call(key, list(args), dict(kwargs), n)

    def _attr(self, n: torch.fx.Node) -> Any:
        val = self.p.gm
        for part in str(n.target).split("."):
            val = getattr(val, part)
        if str(n.target) in self.p.consts:  # `torch.tensor(c)` traced as a constant ModelNew does not own
            return Ref(self.g.const(self.p.consts[str(n.target)]))
        if isinstance(val, torch.Tensor):
            return Ref(self.g.load(f"self.{n.target}", tuple(val.shape)))
        raise Unsupported(f"attribute self.{n.target} of type {type(val).__name__}")

    # ------------------------------------------------------------------ values

    def val(self, x: Any) -> int:
        if isinstance(x, Ref):
            return x.idx
        if isinstance(x, bool) or not isinstance(x, int | float):
            raise Unsupported(f"operand of type {type(x).__name__}")
        if isinstance(x, ShapeInt):
            raise Unsupported("a tensor size used as a number in the computation")
        return self.g.const(float(x))

    def un(self, name: str, x: Any, params: tuple[float, ...] = ()) -> Ref:
        return Ref(self.g.op(name, self.val(x), params=params))

    def bin(self, name: str, a: Any, b: Any) -> Any:
        if not isinstance(a, Ref) and not isinstance(b, Ref):
            return T.fold(name, a, b)
        return Ref(self.g.op(name, self.val(a), self.val(b)))

    # ------------------------------------------------------------------ dispatch

    def _call(self, key: Any, args: list[Any], kwargs: dict[str, Any], n: torch.fx.Node) -> Any:
        from kiln.agents.builtin.lower_extra import extra_call

        hit = extra_call(self, key, args, kwargs, n)  # conv, pooling, attention, views, ... (lower_extra)
        if hit is not NOT_MINE:
            return hit
        if key in (operator.getitem, getattr, ".__getitem__"):
            return self._getitem(args)
        if key in (".size", ".dim"):
            return self._size(key, args, kwargs)
        spec = T.lookup(key)
        if spec is None:
            raise Unsupported(f"tensor method `{key}`" if isinstance(key, str) else f"op `{_name(key)}`")
        kind, name, sig = spec
        bound = T.bind(sig, args, kwargs, key)
        return getattr(self, f"_k_{kind}")(name, bound, n)

    def _getitem(self, args: list[Any]) -> Any:
        obj, idx = args[0], args[1]
        if isinstance(obj, MaxPair) and idx in (0, "values"):
            return obj.values
        if isinstance(obj, MaxPair) and idx in (1, "indices"):
            from kiln.agents.builtin.lower_argreduce import pair_indices

            return pair_indices(self, obj)
        if isinstance(obj, MaxPair):
            raise Unsupported(f"item {idx!r} of torch.max/min's (values, indices)")
        if isinstance(obj, Ref | TView) and idx == "T":
            return self._transpose(obj)
        if isinstance(obj, Ref) and idx in ("shape", "ndim"):
            shape = tuple(ShapeInt(d) for d in self.g.nodes[obj.idx].shape)
            return shape if idx == "shape" else len(shape)
        if isinstance(obj, tuple) and isinstance(idx, int | slice):
            return obj[idx]
        raise Unsupported("indexing or slicing a tensor")

    def _size(self, key: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if not isinstance(args[0], Ref):
            raise Unsupported(f"`{key}` of a non-tensor")
        shape = tuple(ShapeInt(d) for d in self.g.nodes[args[0].idx].shape)
        if key == ".dim":
            return len(shape)
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        return shape if dim is None else shape[int(dim)]

    def _transpose(self, x: Any) -> TView:
        if not isinstance(x, Ref) or self.g.nodes[x.idx].kind != "load" or len(self.g.nodes[x.idx].shape) != 2:
            raise Unsupported("transposing anything but a 2-D input or parameter")
        node = self.g.nodes[x.idx]
        inp = self.g.inputs[node.input]
        return TView(inp.expr, (node.shape[1], node.shape[0]))

    def _k_unary(self, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
        if name == "identity":
            return b["input"]
        op, params = T.unary_op(name, b)
        return self.un(op, b["input"], params)

    def _k_binary(self, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
        if b.get("alpha", 1) != 1 or b.get("rounding_mode") is not None:
            raise Unsupported(f"`{name}` with alpha or rounding_mode")
        return self.bin(name, b["input"], b["other"])

    def _k_pow(self, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
        e = b["exponent"]
        if isinstance(e, Ref):
            raise Unsupported("pow with a tensor exponent")
        table = {0.5: ("sqrt", ()), -0.5: ("rsqrt", ()), -1.0: ("reciprocal", ()), 1.0: None}
        if float(e) in table:
            op = table[float(e)]
            return b["input"] if op is None else self.un(op[0], b["input"])
        if float(e).is_integer() and 2 <= e <= 4:
            return self.un("powi", b["input"], (float(e),))
        raise Unsupported(f"pow with exponent {e}")

    def _k_clamp(self, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
        lo, hi = b.get("min"), b.get("max")
        if isinstance(lo, Ref) or isinstance(hi, Ref):
            raise Unsupported("clamp with tensor bounds")
        if lo is None and hi is None:
            return b["input"]
        if hi is None:  # so lo is set (both None returned above)
            return self.un("clamp_min", b["input"], (float(lo),))  # type: ignore[arg-type]
        if lo is None:
            return self.un("clamp_max", b["input"], (float(hi),))
        return self.un("clamp", b["input"], (float(lo), float(hi)))

    def _k_transpose(self, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
        return self._transpose(b["input"])  # only 2-D inputs: any transpose swaps their two dims

    def _module(self, mod: nn.Module, path: str, args: Any, kwargs: Any, n: torch.fx.Node) -> Any:
        from kiln.agents.builtin.lower_losses import loss_module
        from kiln.agents.builtin.lower_modules import lower_module

        if not kwargs and len(args) in (2, 3):  # nn loss modules (two inputs, three for a triplet loss)
            hit = loss_module(self, mod, list(args))
            if hit is not None:
                return hit
        return lower_module(self, mod, path, list(args), dict(kwargs), n)

    def _k_reduce(self, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
        from kiln.agents.builtin.lower_rows import reduce_op

        return reduce_op(self, name, b, n)

    def _k_row(self, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
        from kiln.agents.builtin.lower_rows import row_op

        return row_op(self, name, b, n)

    def _k_gnorm(self, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
        from kiln.agents.builtin.lower_model_ops import gnorm_op

        return gnorm_op(self, name, b, n)

    def _k_bnorm(self, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
        from kiln.agents.builtin.lower_model_ops import bnorm_op

        return bnorm_op(self, name, b, n)

    def _k_pool(self, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
        from kiln.agents.builtin.lower_model_ops import pool_op

        return pool_op(self, name, b, n)

    def _k_norm(self, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
        from kiln.agents.builtin.lower_losses import norm_op

        return norm_op(self, name, b, n)

    def _k_loss(self, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
        from kiln.agents.builtin.lower_losses import loss_op

        return loss_op(self, name, b, n)

    def _k_band(self, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
        d = b["diagonal"]
        if not isinstance(b["input"], Ref) or len(self.g.nodes[b["input"].idx].shape) < 2:
            raise Unsupported(f"{name} of a non-matrix")
        if isinstance(d, bool) or not isinstance(d, int) or isinstance(d, ShapeInt):
            raise Unsupported(f"{name} with a diagonal that is not a constant int")
        return self.un(name, b["input"], (float(d),))

    def _k_einsum(self, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
        from kiln.agents.builtin.lower_losses import einsum_op

        return einsum_op(self, name, b, n)

    def _k_matmul(self, name: str, b: dict[str, Any], n: torch.fx.Node) -> Any:
        from kiln.agents.builtin.lower_rows import matmul_op

        return matmul_op(self, name, b, n)


def lower(p: Problem) -> KGraph:
    return Lowerer(p).run()


__all__ = ["Lowerer", "MaxPair", "Node", "Ref", "TView", "lower"]
