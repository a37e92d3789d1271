"""Group-norm template: `group_norm(x, G, w, b, eps)` over an (N, C, *spatial) tensor, with any
elementwise epilogue (SiLU, GELU, a residual add of a same-shape tensor) fused into its output pass.

Each (sample, group) is a row of R = C/G * HW contiguous elements; channel of element r is
g * C/G + r // HW, so the affine weights are gathered per element (they stay in L1).
- `_kiln_gn_onepass` (R fits one tile, enough rows to fill the GPU): one program per row: load once,
  mean and variance in registers (two-pass on the registers), normalise, store: one read, one write.
- otherwise the row is cut into S slices of BLOCK: `_kiln_gn_stats` (grid rows x S) writes each
  slice's mean and M2 = sum((x - slice mean)^2) to a workspace; `_kiln_gn_apply` (same grid) combines
  the S partials (Chan's parallel formula: exact, no E[x^2] - E[x]^2 cancellation) and writes its
  slice. Diffusion UNets have few rows (batch 2 x 32 groups = 64 rows of 40960 elements); a row per
  program would leave most of an H200's 132 SMs idle.
"""

from __future__ import annotations

from kiln.agents.builtin.emit import input_exprs
from kiln.agents.builtin.gen_groupnorm_lines import _affine, _epilogue, _kernel, _load_x
from kiln.agents.builtin.gen_groupnorm_rows import rows_kernel, rows_launch
from kiln.agents.builtin.ir import KGraph
from kiln.agents.builtin.plan import Plan
from kiln.agents.builtin.problem import Unsupported


def gnorm_plan(g: KGraph, live: list[int], loads: list[int]) -> Plan:
    gns = [i for i in live if g.nodes[i].kind == "gnorm"]
    kinds = {g.nodes[i].kind for i in live}
    if len(gns) != 1 or kinds & {"mm", "reduce", "rsize"}:
        raise Unsupported("group_norm with another reduction or a matmul in one forward")
    gn = gns[0]
    node = g.nodes[gn]
    x = node.args[0]
    if g.nodes[x].kind != "load":
        raise Unsupported("an op before group_norm (prologue fusion)")
    roles = {x: "x"}
    if node.params[2]:
        roles[node.args[1]] = "w"
    if node.params[3]:
        roles[node.args[-1]] = "b"
    for i in loads:
        if i not in roles and g.nodes[i].shape != node.shape:
            raise Unsupported(f"an epilogue input of shape {list(g.nodes[i].shape)} after group_norm")
        roles.setdefault(i, "full")
    for i in live:
        n = g.nodes[i]
        if n.kind == "op" and gn not in _ancestors(g, i) and any(g.nodes[a].kind != "const" for a in n.args):
            raise Unsupported("an op before group_norm (prologue fusion)")
    if g.out != gn and gn not in _ancestors(g, g.out):
        raise Unsupported("an output that does not depend on group_norm")
    order = [x] + [i for i in loads if i != x]
    return Plan("gnorm", g, live, order, roles, full_shape=node.shape, special=gn)


def _ancestors(g: KGraph, i: int) -> set[int]:
    seen: set[int] = set()
    todo = list(g.nodes[i].args)
    while todo:
        j = todo.pop()
        if j not in seen:
            seen.add(j)
            todo.extend(g.nodes[j].args)
    return seen


def gn_kernels(plan: Plan) -> str:
    ptrs = ", ".join(f"p{k}" for k in range(len(plan.loads)))
    x = plan.g.nodes[plan.special].args[0]
    onepass = ["row = tl.program_id(0)", "offs = tl.arange(0, BLOCK)", *_load_x(plan),
               f"mean = tl.sum(v{x}, axis=0) / R", f"dev = tl.where(mask, v{x} - mean, 0.0)",
               "rstd = tl.rsqrt(tl.sum(dev * dev, axis=0) / R + eps)", *_affine(plan), *_epilogue(plan)]
    stats = ["row = tl.program_id(0)", "s = tl.program_id(1)", "offs = s * BLOCK + tl.arange(0, BLOCK)",
             "mask = offs < R", "x = tl.load(p0 + row.to(tl.int64) * R + offs, mask=mask, other=0.0).to(tl.float32)",
             "n = tl.minimum(R - s * BLOCK, BLOCK).to(tl.float32)", "mean = tl.sum(x, axis=0) / n",
             "dev = tl.where(mask, x - mean, 0.0)", "base = (row.to(tl.int64) * S + s) * 2",
             "tl.store(ws_ptr + base, mean)", "tl.store(ws_ptr + base + 1, tl.sum(dev * dev, axis=0))"]
    apply = ["row = tl.program_id(0)", "s = tl.program_id(1)", "si = tl.arange(0, SP)", "sm = si < S",
             "wb = (row.to(tl.int64) * S + si) * 2",
             "pm = tl.load(ws_ptr + wb, mask=sm, other=0.0)", "pq = tl.load(ws_ptr + wb + 1, mask=sm, other=0.0)",
             "cnt = tl.where(sm, tl.minimum(R - si * BLOCK, BLOCK), 0).to(tl.float32)",
             "mean = tl.sum(pm * cnt, axis=0) / R", "dm = pm - mean",
             "rstd = tl.rsqrt((tl.sum(pq, axis=0) + tl.sum(cnt * dm * dm, axis=0)) / R + eps)",
             "offs = s * BLOCK + tl.arange(0, BLOCK)", *_load_x(plan), *_affine(plan), *_epilogue(plan)]
    shape = "R, HW, CG, G, eps"
    return (_kernel("_kiln_gn_onepass", f"out_ptr, {ptrs}, {shape}, BLOCK: tl.constexpr", onepass) + rows_kernel(plan)
            + _kernel("_kiln_gn_stats", "ws_ptr, p0, R, S, BLOCK: tl.constexpr", stats)
            + _kernel("_kiln_gn_apply", f"out_ptr, {ptrs}, ws_ptr, {shape}, S, BLOCK: tl.constexpr, "
                      "SP: tl.constexpr", apply))


def gn_forward(plan: Plan, cfg: dict) -> str:
    names = input_exprs(plan)
    node = plan.g.nodes[plan.special]
    groups, eps = int(node.params[0]), node.params[1]
    ts = ", ".join(f"t{k}" for k in range(len(names)))
    return "\n".join([
        *[f"t{k} = {e} if {e}.is_contiguous() else {e}.contiguous()" for k, e in enumerate(names)],
        "shape = tuple(t0.shape)",
        f"G = {groups}",
        "HW = _kiln_prod(shape[2:])",
        "CG = shape[1] // G",
        "R, rows = CG * HW, shape[0] * G",
        "out = torch.empty(shape, device=t0.device, dtype=t0.dtype)",
        "if out.numel() == 0:\n    return out",
        f"if R <= {cfg['onepass_max']} and rows >= 2 * _kiln_sm_count(out.device):",
        "    br = triton.next_power_of_2(R)",
        f"    _kiln_gn_onepass[(rows,)](out, {ts}, R, HW, CG, G, {eps!r}, BLOCK=br, "
        f"num_warps=max(1, min({cfg['num_warps']}, br // 256)))",
        "    return out",
        *rows_launch(ts, eps, cfg),
        f"br = min({cfg['block']}, triton.next_power_of_2(R))",
        "S = triton.cdiv(R, br)",
        "ws = torch.empty((rows, S, 2), device=out.device, dtype=torch.float32)",
        f"nw = max(1, min({cfg['num_warps']}, br // 256))",
        "_kiln_gn_stats[(rows, S)](ws, t0, R, S, BLOCK=br, num_warps=nw)",
        f"_kiln_gn_apply[(rows, S)](out, {ts}, ws, R, HW, CG, G, {eps!r}, S, BLOCK=br, "
        "SP=triton.next_power_of_2(S), num_warps=nw)",
        "return out",
    ])
