"""Template plans for the anchor ops of lower_conv (conv, pool, attn, chanstats), and the
render dispatch of their families.

One anchor per kernel. Its data inputs are loads (materialized by the lowering); ops after it
form its elementwise epilogue, whose other inputs broadcast against the anchor's output and are
read by role: "scalar" (one value), "chan" (one value per channel, dim 1), or "bcast" (any
broadcastable shape, read through its expanded strides)."""

from __future__ import annotations

from kiln.agents.builtin.ir import KGraph
from kiln.agents.builtin.plan import Plan
from kiln.agents.builtin.problem import Unsupported

KINDS = {"conv", "pool", "attn", "chanstats"}
NO_EPILOGUE = {"attn", "chanstats"}


def anchors(g: KGraph, nodes: list[int]) -> list[int]:
    return [i for i in nodes if g.nodes[i].kind not in ("load", "const", "op", "rsize")]


def epilogue_role(shape: tuple[int, ...], out: tuple[int, ...]) -> str:
    if len(shape) > len(out):
        raise Unsupported(f"an epilogue input of shape {list(shape)} against an output of shape {list(out)}")
    full = (1,) * (len(out) - len(shape)) + tuple(shape)
    if any(s not in (1, o) for s, o in zip(full, out, strict=True)):
        raise Unsupported(f"an epilogue input of shape {list(shape)} against an output of shape {list(out)}")
    big = [d for d, s in enumerate(full) if s != 1]
    if not big:
        return "scalar"
    return "chan" if big == [1] and len(out) > 2 else "bcast"


def _descends(g: KGraph, i: int, anchor: int, memo: dict[int, bool]) -> bool:
    if i == anchor:
        return True
    if i not in memo:
        memo[i] = any(_descends(g, a, anchor, memo) for a in g.nodes[i].args)
    return memo[i]


def extra_plan(g: KGraph, live: list[int], loads: list[int]) -> Plan:
    found = anchors(g, live)
    if len(found) != 1:
        names = sorted({g.nodes[i].kind for i in found})
        raise Unsupported(f"{' and '.join(names)} in one kernel")
    a = found[0]
    node = g.nodes[a]
    if node.kind in NO_EPILOGUE and g.out != a:
        raise Unsupported(f"ops after {node.op} in its kernel")
    data = list(node.args)
    if any(g.nodes[i].kind != "load" for i in data):
        raise Unsupported(f"an op before {node.op} (prologue fusion)")
    memo: dict[int, bool] = {}
    if not _descends(g, g.out, a, memo):
        raise Unsupported("an output that does not depend on the kernel's main op")
    if g.nodes[g.out].shape != node.shape:
        raise Unsupported(f"an epilogue that broadcasts {node.op}'s output {list(node.shape)} to a larger shape")
    roles = {i: f"arg{k}" for k, i in enumerate(data)}
    for i in loads:
        if i not in roles:
            roles[i] = epilogue_role(g.nodes[i].shape, node.shape)
    order = data + [i for i in loads if i not in data]
    return Plan(_family(g, a), g, live, order, roles, full_shape=node.shape, special=a)


def _family(g: KGraph, a: int) -> str:
    node = g.nodes[a]
    if node.kind == "conv":
        w = g.nodes[node.args[1]].shape
        return "dwconv" if node.op == "conv" and w[1] == 1 and int(node.params[2]) > 1 else "conv"
    return node.kind


FAMILIES = {"conv", "dwconv", "pool", "attn", "chanstats"}


def family_parts(plan: Plan, cfg: dict) -> tuple[str, str, str]:
    """(kernels, forward body, helpers) for one of these families."""
    from kiln.agents.builtin import gen_attention, gen_chanstats, gen_conv, gen_dwconv, gen_pool
    from kiln.agents.builtin.emit import HELPERS

    gen = {"conv": gen_conv.conv_parts, "dwconv": gen_dwconv.dw_parts, "pool": gen_pool.pool_parts,
           "attn": gen_attention.attn_parts, "chanstats": gen_chanstats.stats_parts}[plan.family]  # fmt: skip
    kernels, fwd, helpers = gen(plan, cfg)
    return kernels, fwd, HELPERS + helpers
