"""The fused elementwise epilogue of the spatial families (conv, depthwise conv, pooling).

Their outputs are viewed as (n, c, d, h, w). The kernel hands in one index expression per dim
(a scalar, or a tile broadcast along the right axis); each epilogue input is read by its role:
"scalar" (one value), "chan" (offset c * stride_c) or "bcast" (the five expanded strides, 0
where the input is broadcast), then the epilogue's ops run in fp32 and the result is stored once.
"""

from __future__ import annotations

from kiln.agents.builtin.emit import expr, input_exprs, op_line
from kiln.agents.builtin.plan import Plan

DIMS = ("n", "c", "d", "h", "w")


def extra_loads(plan: Plan, first: int) -> list[tuple[int, int]]:
    """(kernel slot k, load node) of the epilogue inputs: plan.loads[first:]."""
    return [(k, i) for k, i in enumerate(plan.loads) if k >= first]


def kernel_args(plan: Plan, first: int) -> tuple[str, str]:
    """(pointer args, stride args) of the epilogue inputs, for the kernel signature."""
    ptrs = "".join(f", p{k}" for k, _ in extra_loads(plan, first))
    strides = "".join(
        "".join(f", e{k}_{d}" for d in DIMS) for k, i in extra_loads(plan, first) if plan.roles[i] != "scalar"
    )
    return ptrs, strides


def lines(plan: Plan, first: int, idx: dict[str, str], mask: str, chan_mask: str | None) -> list[str]:
    """Epilogue lines after `v<anchor> = acc`: loads by role, then every op, in DAG order.
    `chan_mask` guards the per-channel loads (None where the channel is one scalar per program)."""
    out = []
    for i in plan.live:
        n = plan.g.nodes[i]
        if n.kind == "load" and i in plan.loads[first:]:
            k = plan.loads.index(i)
            role = plan.roles[i]
            if role == "scalar":
                out.append(f"v{i} = tl.load(p{k}).to(tl.float32)")
                continue
            if role == "chan":
                guard = f", mask={chan_mask}, other=0.0" if chan_mask else ""
                out.append(f"v{i} = tl.load(p{k} + {idx['c']} * e{k}_c{guard}).to(tl.float32)")
                continue
            off = " + ".join(f"{idx[d]}{'.to(tl.int64)' if d == 'n' else ''} * e{k}_{d}" for d in DIMS)  # > 2^31 elements
            out.append(f"v{i} = tl.load(p{k} + {off}, mask={mask}, other=0.0).to(tl.float32)")
        elif n.kind == "op":
            out.append(op_line(plan, i))
    return out


def result(plan: Plan) -> str:
    return expr(plan, plan.g.out)


def forward_lines(plan: Plan, first: int, batched: bool, nsp: int) -> tuple[list[str], str, str]:
    """(forward lines binding e<k> and their strides, pointer launch args, stride launch args)."""
    names = input_exprs(plan)
    body, ptrs, strides = [], "", ""
    for k, i in extra_loads(plan, first):
        body.append(f"e{k} = {names[k]}")
        ptrs += f", e{k}"
        if plan.roles[i] != "scalar":
            body.append(f"st{k} = _kiln_bstrides5(e{k}, out.shape, {batched}, {nsp})")
            strides += f", *st{k}"
    return body, ptrs, strides


def patch_head(chan: str, count: str) -> str:
    """Kernel lines of the direct spatial kernels (depthwise, pooling): a program owns a BD x BH x BW
    patch of one (sample n, channel `chan` of `count`); od, oh, ow are the patch's output indices."""
    return f"""pid = tl.program_id(0)
tw = pid % TILES_W
t = pid // TILES_W
th = t % TILES_H
t = t // TILES_H
td = t % TILES_D
t = t // TILES_D
{chan} = t % {count}
n = t // {count}
r = tl.arange(0, BLOCK)
od = td * (BLOCK // (BH * BW)) + r // (BH * BW)
oh = th * BH + (r // BW) % BH
ow = tw * BW + r % BW
m_ok = (od < OD) & (oh < OH) & (ow < OW)"""


HELPER = '''

def _kiln_bstrides5(t, shape, batched, nsp):
    """Strides of t broadcast to `shape`, as (n, c, d, h, w): 0 where it is broadcast or absent."""
    st = list(t.expand(shape).stride())
    if not batched:
        st = [0] + st
    return st[:2] + [0] * (3 - nsp) + st[2:]


def _kiln_patch(block, d, h, w):
    """A BD x BH x BW patch of about `block` outputs: powers of two, filled along w, then h, then d
    (small planes take several rows or depths per program), at least 16 (tl.dot's minimum)."""
    bw = min(block, triton.next_power_of_2(w))
    bh = min(max(1, block // bw), triton.next_power_of_2(h))
    bd = min(max(1, block // (bw * bh)), triton.next_power_of_2(d))
    while bd * bh * bw < 16:
        bd *= 2
    return bd, bh, bw


def _kiln_view5(t, batched, nsp):
    """t as (n, c, d, h, w): a view with size-1 dims for a missing batch and leading spatial dims."""
    if not batched:
        t = t.unsqueeze(0)
    for _ in range(3 - nsp):
        t = t.unsqueeze(2)
    return t
'''
