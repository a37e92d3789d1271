"""The Triton lines both group-norm kernels share (gen_groupnorm.py's one-pass and split kernels,
gen_groupnorm_rows.py's one-launch kernel): load x, the affine step, the epilogue and the def."""

from __future__ import annotations

from kiln.agents.builtin.emit import expr, op_line
from kiln.agents.builtin.plan import Plan


def _affine(plan: Plan) -> list[str]:
    """Lines from x (loaded as v<x>) to the group-norm value v<gn>, given mean and rstd."""
    gn = plan.special
    node = plan.g.nodes[gn]
    x = node.args[0]
    lines = [f"v{gn} = (v{x} - mean) * rstd"]
    for i, role in plan.roles.items():
        if role in ("w", "b"):
            k = plan.loads.index(i)
            other = "1.0" if role == "w" else "0.0"
            lines.append(f"aff{k} = tl.load(p{k} + c, mask=mask, other={other}).to(tl.float32)")
            lines.append(f"v{gn} = v{gn} {'*' if role == 'w' else '+'} aff{k}")
    return lines


def _epilogue(plan: Plan) -> list[str]:
    lines = []
    for i in plan.live:
        n = plan.g.nodes[i]
        if n.kind == "load" and plan.roles[i] == "full":
            k = plan.loads.index(i)
            lines.append(f"v{i} = tl.load(p{k} + ptr, mask=mask, other=0.0).to(tl.float32)")
        elif n.kind == "op":
            lines.append(op_line(plan, i))
    return lines + [f"tl.store(out_ptr + ptr, {expr(plan, plan.g.out)}.to(out_ptr.dtype.element_ty), mask=mask)"]


def _load_x(plan: Plan) -> list[str]:
    x = plan.g.nodes[plan.special].args[0]
    return ["mask = offs < R", "ptr = row.to(tl.int64) * R + offs", "c = (row % G) * CG + offs // HW",
            f"v{x} = tl.load(p0 + ptr, mask=mask, other=0.0).to(tl.float32)"]


def _kernel(name: str, args: str, body: list[str]) -> str:
    return f"\n\n@triton.jit\ndef {name}({args}):\n" + "\n".join("    " + ln for ln in body) + "\n"
