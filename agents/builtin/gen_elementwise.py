"""Elementwise template: any DAG of elementwise ops over tensors with broadcasting.

Two kernels. `_kiln_ew_flat` (every input has the output's shape and is contiguous): a flat
index, 16-byte vector accesses, and a grid-stride loop so a persistent grid (a few programs per
SM) covers any size. `_kiln_ew_bcast` (some input is broadcast or strided): the output's shape
collapsed to 4-D [S0, S1, S2, S3] and tiled as rows (S0*S1*S2) x columns (S3); the per-row
index math (div/mod) happens once per row of the tile, not per element, and each input reads
base(row) + col * stride3 (stride 0 where it is broadcast).
"""

from __future__ import annotations

from kiln.agents.builtin.emit import expr, input_exprs, op_line
from kiln.agents.builtin.plan import Plan
from kiln.agents.builtin.problem import Unsupported


def _body(plan: Plan, load: str) -> list[str]:
    lines = []
    for i in plan.live:
        n = plan.g.nodes[i]
        if n.kind == "load" and plan.g.inputs[n.input].scalar:  # a number passed by value
            lines.append(f"v{i} = tl.full((1,), p{plan.loads.index(i)}, tl.float32)")
        elif n.kind == "load":
            k = plan.loads.index(i)
            lines.append(f"v{i} = tl.load(p{k} + {load.format(k=k)}, mask=mask, other=0.0).to(tl.float32)")
        elif n.kind == "op":
            lines.append(op_line(plan, i))
    return lines


def ew_kernel(plan: Plan) -> str:
    nin = len(plan.loads)
    ptrs = ", ".join(f"p{k}" for k in range(nin))
    strides = ", ".join(f"s{k}_0, s{k}_1, s{k}_2, s{k}_3" for k in range(nin))
    out = expr(plan, plan.g.out)
    flat = ["offs = tl.cast(t, tl.int64) * BLOCK + tl.arange(0, BLOCK)", "mask = offs < n"]
    flat += _body(plan, "offs") + [f"tl.store(out_ptr + offs, {out}.to(out_ptr.dtype.element_ty), mask=mask)"]
    bcast = [
        "rows = tl.program_id(0) * RB + tl.arange(0, RB)[:, None]",
        "cols = tl.program_id(1) * CB + tl.arange(0, CB)[None, :]",
        "mask = (rows < NR) & (cols < S3)",
        "i2 = rows % S2",
        "i1 = (rows // S2) % S1",
        "i0 = tl.cast(rows // S2 // S1, tl.int64)",
    ]
    bcast += _body(plan, "i0 * s{k}_0 + i1 * s{k}_1 + i2 * s{k}_2 + cols * s{k}_3")
    bcast.append(f"tl.store(out_ptr + tl.cast(rows, tl.int64) * S3 + cols, {out}.to(out_ptr.dtype.element_ty), mask=mask)")
    return (
        f"\n\n@triton.jit\ndef _kiln_ew_flat(out_ptr, {ptrs}, n, BLOCK: tl.constexpr):\n"
        "    pid = tl.program_id(0)\n"
        "    for t in range(pid, tl.cdiv(n, BLOCK), tl.num_programs(0)):\n"
        + "\n".join("        " + ln for ln in flat)
        + f"\n\n\n@triton.jit\ndef _kiln_ew_bcast(out_ptr, {ptrs}, NR, S1, S2, S3, {strides}, RB: tl.constexpr, CB: tl.constexpr):\n"
        + "\n".join("    " + ln for ln in bcast)
        + "\n"
    )


def ew_forward(plan: Plan, cfg: dict) -> str:
    """`ins` are the kernel's tensors (they set the shape), `args` every operand in the kernel's order:
    a Python number goes by value, as a float (Triton would specialise an int 1 into a constant)."""
    scalar = [plan.g.inputs[plan.g.nodes[i].input].scalar for i in plan.loads]
    names = input_exprs(plan)
    if all(scalar):
        raise Unsupported("an elementwise forward of Python numbers alone")
    args = [f"float({e})" if sc else e for e, sc in zip(names, scalar, strict=True)]
    tens = [e for e, sc in zip(names, scalar, strict=True) if not sc]
    blk, nw = cfg["block"], cfg["num_warps"]
    persistent = f"min(-(-n // {blk}), _kiln_sm_count(out.device) * {cfg['waves']})"
    zeros = "[0, 0, 0, 0]"
    strides = "[" + ", ".join(zeros if sc else f"{e}.expand(shape).stride()" for e, sc in zip(names, scalar, strict=True)) + "]"
    return "\n".join(
        [
            # straight-line host code: this runs on every call (torch.broadcast_shapes alone cost 6-9 us
            # a call on the CPU machine, most of a small patched op's host time)
            f"args = [{', '.join(args)}]",
            f"shape = {tens[0]}.shape",
            *([f"same = {' and '.join(f'{e}.shape == shape' for e in tens[1:])}",
               f"shape = shape if same else torch.broadcast_shapes({', '.join(f'{e}.shape' for e in tens)})"]
              if len(tens) > 1 else ["same = True"]),
            "shape = tuple(shape)",
            f"out = torch.empty(shape, device={tens[0]}.device, dtype={tens[0]}.dtype)",
            "n = out.numel()",
            "if n == 0:\n    return out",
            f"if same and {' and '.join(f'{e}.is_contiguous()' for e in tens)}:",
            f"    grid = ({persistent if cfg['persistent'] else f'-(-n // {blk})'},)",
            f"    _kiln_ew_flat[grid](out, *args, n, BLOCK={blk}, num_warps={nw}, num_stages={cfg['num_stages']})",
            "    return out",
            f"sizes, strides = _kiln_collapse(shape, {strides})",
            f"cb = min({blk}, triton.next_power_of_2(sizes[3]))",
            f"rb = max(1, {blk} // cb)",
            "nr = sizes[0] * sizes[1] * sizes[2]",
            "grid = (triton.cdiv(nr, rb), triton.cdiv(sizes[3], cb))",
            "_kiln_ew_bcast[grid](out, *args, nr, sizes[1], sizes[2], sizes[3], *[s for st in strides for s in st], "
            f"RB=rb, CB=cb, num_warps={nw}, num_stages={cfg['num_stages']})",
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
