"""Decide which template family covers a lowered DAG, and check the family's preconditions."""

from __future__ import annotations

from kiln.agents.builtin.ir import KGraph
from kiln.agents.builtin.plan import Plan
from kiln.agents.builtin.problem import Unsupported

INDEX_OPS = ("triu", "tril")  # masks by (row, column): only the matmul epilogue has both indices (rm2, rn2)


def classify(g: KGraph) -> Plan:
    live = g.live()
    loads = [i for i in live if g.nodes[i].kind == "load"]
    kinds = {g.nodes[i].kind for i in live}
    if kinds - {"load", "const", "op"} and any(g.inputs[g.nodes[i].input].scalar for i in loads):
        raise Unsupported("a Python number forward input outside an elementwise kernel")
    if "argred" in kinds:
        from kiln.agents.builtin.gen_argreduce import argreduce_plan

        return argreduce_plan(g, live, loads)
    if "xent" in kinds:
        from kiln.agents.builtin.gen_crossent import crossent_plan

        return crossent_plan(g, live, loads)
    if "scan" in kinds:
        from kiln.agents.builtin.gen_scan import scan_plan

        return scan_plan(g, live, loads)
    if kinds & {"conv", "pool", "attn", "chanstats"}:  # extra_plans.KINDS
        from kiln.agents.builtin.extra_plans import extra_plan

        return extra_plan(g, live, loads)
    if "gnorm" in kinds:
        from kiln.agents.builtin.gen_groupnorm import gnorm_plan

        return gnorm_plan(g, live, loads)
    if "mm" in kinds:
        return _matmul(g, live, loads)
    if any(g.nodes[i].kind == "op" and g.nodes[i].op in INDEX_OPS for i in live):
        raise Unsupported("triu/tril outside a matmul's epilogue")
    if "reduce" in kinds:
        return _row(g, live, loads)
    if "rsize" in kinds:
        raise Unsupported("a reduction size outside a reduction")
    return Plan("elementwise", g, live, loads, {i: "full" for i in loads})


def _row(g: KGraph, live: list[int], loads: list[int]) -> Plan:
    reds = [i for i in live if g.nodes[i].kind == "reduce"]
    dimsets = {g.nodes[i].params for i in reds}
    full = {g.nodes[g.nodes[i].args[0]].shape for i in reds}
    if len(dimsets) != 1 or len(full) != 1:
        raise Unsupported("reductions over different dims or different shapes in one forward")
    dims = [int(d) for d in next(iter(dimsets))]
    shape = next(iter(full))
    if dims != list(range(dims[0], dims[-1] + 1)):
        raise Unsupported(f"a reduction over non-adjacent dims {dims}")
    d0, d1 = dims[0], dims[-1]
    roles = {i: _row_role(g.nodes[i].shape, shape, d0, d1) for i in loads}
    _check_row_ops(g, live, shape, d0, d1)
    return Plan("row", g, live, loads, roles, (d0, d1), shape)


def _row_role(s: tuple[int, ...], full: tuple[int, ...], d0: int, d1: int) -> str:
    if s == full:
        return "full"
    trimmed = s[next((i for i, v in enumerate(s) if v != 1), len(s)) :]
    if d1 == len(full) - 1 and trimmed == full[d0:]:
        return "vec"
    raise Unsupported(f"an input of shape {list(s)} broadcast against {list(full)} in a reduction")


def _check_row_ops(g: KGraph, live: list[int], full: tuple[int, ...], d0: int, d1: int) -> None:
    keep = tuple(1 if d0 <= i <= d1 else v for i, v in enumerate(full))
    levels: dict[int, str] = {}
    for i in live:
        n = g.nodes[i]
        if n.kind == "load":
            levels[i] = "full"
        elif n.kind in ("const", "rsize"):
            levels[i] = "scalar"
        elif n.kind == "reduce":
            levels[i] = "red"
        else:
            arg_lv = {levels[a] for a in n.args} - {"scalar"}
            if "full" in arg_lv and "red" in arg_lv and any(
                levels[a] == "red" and g.nodes[a].shape != keep for a in n.args
            ):
                raise Unsupported("a reduced tensor broadcast back without keepdim")
            levels[i] = "full" if "full" in arg_lv else ("red" if "red" in arg_lv else "scalar")
    if levels[g.out] not in ("full", "red"):
        raise Unsupported("an output that does not depend on the input")


def _matmul(g: KGraph, live: list[int], loads: list[int]) -> Plan:
    mms = [i for i in live if g.nodes[i].kind == "mm"]
    if len(mms) != 1 or "reduce" in {g.nodes[i].kind for i in live}:
        raise Unsupported("more than one matmul, or a matmul with a reduction, in one forward")
    mm = mms[0]
    a, b = g.nodes[mm].args
    out = g.nodes[mm].shape
    roles = {a: "a", b: "b"}
    for i in loads:
        if i in roles:
            continue
        s = g.nodes[i].shape
        if s == out:
            roles[i] = "full"
        elif s[-1:] == out[-1:] and all(v == 1 for v in s[:-1]):
            roles[i] = "vec_n"
        else:
            raise Unsupported(f"an epilogue input of shape {list(s)} against the matmul output {list(out)}")
    return Plan("matmul", g, live, [a, b] + [i for i in loads if i not in (a, b)], roles, mm=mm)
