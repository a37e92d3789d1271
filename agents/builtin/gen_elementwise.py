"""Elementwise template: any DAG of elementwise ops over tensors with broadcasting.

The output is walked as a flat index. Inputs with the output's shape and contiguous memory are
read at the flat index (vectorized 16-byte accesses); broadcast or strided inputs get a 4-D
index (the output's shape collapsed to at most 4 dims) and their expanded strides (0 where
broadcast). Each FLAT<k> is a constexpr, so the common all-contiguous case has no index math.
A grid-stride loop lets a persistent grid (a few programs per SM) cover any size.
"""

from __future__ import annotations

from kiln.agents.builtin.classify import Plan
from kiln.agents.builtin.emit import expr, input_exprs, op_line


def ew_kernel(plan: Plan) -> str:
    nin = len(plan.loads)
    ptrs = ", ".join(f"p{k}" for k in range(nin))
    strides = ", ".join(f"s{k}_0, s{k}_1, s{k}_2, s{k}_3" for k in range(nin))
    flags = ", ".join(f"FLAT{k}: tl.constexpr" for k in range(nin))
    lines = [
        "offs = tl.cast(t, tl.int64) * BLOCK + tl.arange(0, BLOCK)",
        "mask = offs < n",
        "if not ALL_FLAT:",
        "    i3 = offs % S3",
        "    rest = offs // S3",
        "    i2 = rest % S2",
        "    rest = rest // S2",
        "    i1 = rest % S1",
        "    i0 = rest // S1",
    ]
    for i in plan.live:
        n = plan.g.nodes[i]
        if n.kind == "load":
            k = plan.loads.index(i)
            lines += [
                f"if FLAT{k}:",
                f"    v{i} = tl.load(p{k} + offs, mask=mask, other=0.0).to(tl.float32)",
                "else:",
                f"    v{i} = tl.load(p{k} + i0 * s{k}_0 + i1 * s{k}_1 + i2 * s{k}_2 + i3 * s{k}_3, mask=mask, other=0.0).to(tl.float32)",
            ]
        elif n.kind == "op":
            lines.append(op_line(plan, i))
    lines.append(f"tl.store(out_ptr + offs, {expr(plan, plan.g.out)}.to(out_ptr.dtype.element_ty), mask=mask)")
    inner = "\n".join("        " + ln for ln in lines)
    return (
        "\n\n@triton.jit\n"
        f"def _kiln_ew(out_ptr, {ptrs}, n, S1, S2, S3, {strides}, BLOCK: tl.constexpr, ALL_FLAT: tl.constexpr, {flags}):\n"
        "    pid = tl.program_id(0)\n"
        "    for t in range(pid, tl.cdiv(n, BLOCK), tl.num_programs(0)):\n"
        f"{inner}\n"
    )


def ew_forward(plan: Plan, cfg: dict) -> str:
    names = input_exprs(plan)
    nin = len(names)
    flats = ", ".join(f"FLAT{k}=flat[{k}]" for k in range(nin))
    return "\n".join(
        [
            f"ins = [{', '.join(names)}]",
            "shape = tuple(torch.broadcast_shapes(*[t.shape for t in ins]))",
            "out = torch.empty(shape, device=ins[0].device, dtype=ins[0].dtype)",
            "n = out.numel()",
            "if n == 0:\n    return out",
            "flat = [tuple(t.shape) == shape and t.is_contiguous() for t in ins]",
            "sizes, strides = _kiln_collapse(shape, [t.expand(shape).stride() for t in ins])",
            f"grid = (min(triton.cdiv(n, {cfg['block']}), _kiln_sm_count(out.device) * {cfg['waves']}) "
            f"if {bool(cfg['persistent'])} else triton.cdiv(n, {cfg['block']}),)",
            f"_kiln_ew[grid](out, *ins, n, sizes[1], sizes[2], sizes[3], *[s for st in strides for s in st], "
            f"BLOCK={cfg['block']}, ALL_FLAT=all(flat), {flats}, num_warps={cfg['num_warps']}, "
            f"num_stages={cfg['num_stages']})",
            "return out",
        ]
    )


COLLAPSE_HELPER = '''

def _kiln_collapse(shape, strides):
    """Merge adjacent dims that are contiguous for every tensor, drop size-1 dims, pad to 4-D."""
    dims = [(s, [st[i] for st in strides]) for i, s in enumerate(shape) if s != 1]
    merged = []
    for size, sts in dims:
        if merged and all(p == q * size for p, q in zip(merged[-1][1], sts)):
            merged[-1] = (merged[-1][0] * size, sts)
        else:
            merged.append((size, sts))
    if len(merged) > 4:
        raise ValueError("kiln: more than 4 non-mergeable broadcast dims")
    merged = [(1, [0] * len(strides))] * (4 - len(merged)) + merged
    sizes = [m[0] for m in merged]
    return sizes, [[m[1][k] for m in merged] for k in range(len(strides))]
'''
