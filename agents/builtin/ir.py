"""The kernel DAG the templates generate code from: loads, constants, elementwise ops,
reductions along one axis, and at most one matmul. One node per value, computed once."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Node:
    kind: str  # "load" | "const" | "rsize" | "op" | "reduce" | "mm"
    op: str = ""  # op name ("add", "gelu", ...), reduce kind ("sum", "max", "min")
    args: tuple[int, ...] = ()  # indices of argument nodes
    params: tuple[float, ...] = ()  # op parameters (slopes, bounds, ...)
    value: float = 0.0  # const value
    input: int = -1  # load: index into KGraph.inputs
    shape: tuple[int, ...] = ()  # the value's shape at the traced sizes


@dataclass
class Input:
    """A tensor the kernel reads: `expr` is how ModelNew.forward names it ("x", "self.fc.weight")."""

    expr: str
    shape: tuple[int, ...]
    transposed: bool = False  # matmul operand given as `.t()` of a 2-D tensor
    scalar: bool = False  # a Python number forward argument: passed to the kernel by value


@dataclass
class KGraph:
    nodes: list[Node] = field(default_factory=list)
    inputs: list[Input] = field(default_factory=list)
    out: int = -1
    out_shape: tuple[int, ...] = ()
    reduce_dims: tuple[int, ...] = ()  # row family: the reduced dims of the full tensor
    full_shape: tuple[int, ...] = ()  # row family: the shape of the reduced tensor
    cuts: dict[int, str] = field(default_factory=dict)  # node -> name of the intermediate it is materialized as

    def add(self, node: Node) -> int:
        if node in self.nodes:  # CSE: identical nodes are the same value
            return self.nodes.index(node)
        self.nodes.append(node)
        return len(self.nodes) - 1

    def load(self, expr: str, shape: tuple[int, ...], transposed: bool = False, scalar: bool = False) -> int:
        for i, inp in enumerate(self.inputs):
            if inp.expr == expr and inp.transposed == transposed:
                return self.add(Node("load", input=i, shape=shape))
        self.inputs.append(Input(expr, shape, transposed, scalar))
        return self.add(Node("load", input=len(self.inputs) - 1, shape=shape))

    def const(self, value: float) -> int:
        return self.add(Node("const", value=float(value)))

    def op(self, name: str, *args: int, params: tuple[float, ...] = (), shape: tuple[int, ...] | None = None) -> int:
        shp = shape if shape is not None else _bshape([self.nodes[a].shape for a in args])
        return self.add(Node("op", op=name, args=args, params=params, shape=shp))

    def reduce(self, kind: str, arg: int, dims: tuple[int, ...], keepdim: bool) -> int:
        shp = self.nodes[arg].shape
        out = tuple(1 if i in dims else s for i, s in enumerate(shp)) if keepdim else tuple(
            s for i, s in enumerate(shp) if i not in dims
        )
        return self.add(Node("reduce", op=kind, args=(arg,), shape=out, params=tuple(float(d) for d in dims)))

    def cut(self, i: int) -> str:
        """Materialize node i as an intermediate tensor (a kernel of its own writes it); its name."""
        return self.cuts.setdefault(i, f"h{len(self.cuts)}")

    def kinds(self) -> set[str]:
        return {n.kind for n in self.nodes}

    def live(self) -> list[int]:
        """Indices of nodes the output depends on, in topological (creation) order."""
        need = {self.out}
        for i in range(len(self.nodes) - 1, -1, -1):
            if i in need:
                need.update(self.nodes[i].args)
        return sorted(need)


def _bshape(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    nd = max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        for i, d in enumerate((1,) * (nd - len(s)) + tuple(s)):
            out[i] = d if out[i] == 1 else out[i]
    return tuple(out)
