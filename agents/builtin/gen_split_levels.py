"""Split rows for full-size outputs: a norm or softmax over few, very long rows.

KernelBench's 40_LayerNorm normalises 16 rows of 4 Mi elements: the looped row kernel gives each
row one program, 16 programs on a 132-SM GPU (3 % of copy bandwidth). Here the reduced extent R
is cut into SPLIT slices and every reduction level gets two kernels:
- `_kiln_lvl{k}_split` reduces each (tile, slice) into a workspace [n, SPLIT, M*N] (fp64 sums),
  reading the values of earlier levels from `vals`;
- `_kiln_lvl{k}_finish` combines the slices, computes that level's ops on reduced values (the
  mean from the sum, rsqrt(var + eps)) and stores every reduced value of the level in `vals`
  ([n_values, M*N], fp32);
then `_kiln_lvl_out` writes the output slice by slice from `vals`. Same maths as the looped
kernel (two-pass variance stays two-pass), more programs.
"""

from __future__ import annotations

from kiln.agents.builtin.emit import ancestors, expr, op_line
from kiln.agents.builtin.gen_row import RowKernel
from kiln.agents.builtin.gen_split import SPLIT_WHEN, split_setup
from kiln.agents.builtin.plan import Plan

FILL = {"sum": "0.0", "max": '-float("inf")', "min": 'float("inf")'}
RED = {"sum": "tl.sum", "max": "tl.max", "min": "tl.min"}
SLICE = "s * RS, tl.minimum(s * RS + RS, R)"


def multi_splittable(plan: Plan, layout: str) -> bool:
    return RowKernel(plan, layout, True, "").cls[plan.g.out] == "full"


def _reduced(k: RowKernel) -> list[int]:
    """Every value at the reduced level (reductions and ops on them), in order: the `vals` slots."""
    return [i for i in k.p.live if k.cls[i] == "red" and k.p.g.nodes[i].kind in ("reduce", "op")]


def _voff(layout: str) -> tuple[str, str]:
    if layout == "rows":
        return "rows", "row_ok"
    return "tl.cast(m, tl.int64) * N + ncol", "n_ok"


def _load_vals(k: RowKernel, nodes: list[int], slots: list[int]) -> list[str]:
    off, ok = _voff(k.layout)
    return [f"v{i} = tl.load(vals_ptr + {slots.index(i)} * MN + {off}, mask={ok}, other=0.0)" for i in nodes]


def _kernel(name: str, args: str, layout: str, body: list[str], split_axis: bool) -> str:
    tile = "ROWS: tl.constexpr" if layout == "rows" else "BLOCK_N: tl.constexpr"
    head = "    pid = tl.program_id(0)\n" + ("    s = tl.program_id(1)\n" if split_axis else "")
    return (f"\n\n@triton.jit\ndef {name}({args}, {tile}):\n" + head
            + "    for t in range(pid, ntiles, tl.num_programs(0)):\n" + "\n".join("        " + ln for ln in body) + "\n")


def level_kernels(plan: Plan, layout: str, sfx: str = "") -> str:
    k = RowKernel(plan, layout, True, "")
    slots = _reduced(k)
    ptrs = ", ".join(f"p{j}" for j in range(len(plan.loads)))
    off, ok = _voff(layout)
    out = ""
    for lv in range(1, max(k.level[i] for i in slots) + 1):
        earlier = [i for i in slots if k.level[i] < lv]
        reds = [i for i in slots if k.level[i] == lv and plan.g.nodes[i].kind == "reduce"]
        body = k._setup() + _load_vals(k, earlier, slots)
        body += k._pass(lv, reds, set(earlier), rng=SLICE, epilogue=False, sum_acc="tl.float64")
        body += [f"tl.store(ws_ptr + (tl.cast({q}, tl.int64) * SPLIT + s) * MN + {off}, v{i}, mask={ok})"
                 for q, i in enumerate(reds)]
        out += _kernel(f"_kiln_lvl{lv}_split{sfx}", f"ws_ptr, vals_ptr, {ptrs}, M, R, N, MN, ntiles, RS, SPLIT, "
                       "BLOCK_R: tl.constexpr", layout, body, True)
        sidx = "tl.arange(0, SP)[None, :]" if layout == "rows" else "tl.arange(0, SP)[:, None]"
        fin = k._setup() + [f"sidx = {sidx}"] + _load_vals(k, earlier, slots)
        for q, i in enumerate(reds):
            op = plan.g.nodes[i].op
            fin += [f"w = tl.load(ws_ptr + (tl.cast({q}, tl.int64) * SPLIT + sidx) * MN + {off}, "
                    f"mask=(sidx < SPLIT) & {ok}, other={FILL[op]})",
                    f"v{i} = {RED[op]}(w, axis={k.axis}, keep_dims=True).to(tl.float32)"]
        level_vals = [i for i in slots if k.level[i] == lv]
        fin += [op_line(plan, i) for i in level_vals if plan.g.nodes[i].kind == "op"]
        fin += [f"tl.store(vals_ptr + {slots.index(i)} * MN + {off}, v{i}, mask={ok})" for i in level_vals]
        out += _kernel(f"_kiln_lvl{lv}_finish{sfx}", "vals_ptr, ws_ptr, M, R, N, MN, ntiles, SPLIT, SP: tl.constexpr",
                       layout, fin, False)
    body = k._setup() + _load_vals(k, slots, slots) + [f"for c in range({SLICE}, BLOCK_R):"]
    loop = k._chunk("c + ") + k._full_nodes(ancestors(plan, [plan.g.out], set(slots)))
    body += ["    " + ln for ln in loop + [k._store(expr(plan, plan.g.out))]]
    return out + _kernel(f"_kiln_lvl_out{sfx}", f"out_ptr, vals_ptr, {ptrs}, M, R, N, MN, ntiles, RS, "
                         "BLOCK_R: tl.constexpr", layout, body, True)


def level_forward(plan: Plan, layout: str, cfg: dict, sfx: str = "") -> list[str]:
    """Forward lines that run the split levels when the tiles cannot fill the device."""
    k = RowKernel(plan, layout, True, "")
    slots = _reduced(k)
    levels = max(k.level[i] for i in slots)
    width = max(sum(1 for i in slots if k.level[i] == lv and plan.g.nodes[i].kind == "reduce")
                for lv in range(1, levels + 1))
    args = ", ".join(f"t{j}" for j in range(len(plan.loads)))
    head, sizing = split_setup(layout, cfg)
    body = sizing + [
        f"vals = torch.empty(({len(slots)}, M * N), device=out.device, dtype=torch.float32)",
        f"ws = torch.empty(({width}, split, M * N), device=out.device, dtype=torch.float64)",
    ]
    for lv in range(1, levels + 1):
        body += [
            f"_kiln_lvl{lv}_split{sfx}[(tiles_s, split)](ws, vals, {args}, M, R, N, M * N, tiles_s, rs, split, "
            f"BLOCK_R=bc, **tile_kw, num_warps={cfg['num_warps']})",
            f"_kiln_lvl{lv}_finish{sfx}[(tiles_s,)](vals, ws, M, R, N, M * N, tiles_s, split, "
            "SP=triton.next_power_of_2(split), **tile_kw, num_warps=4)",
        ]
    body += [f"_kiln_lvl_out{sfx}[(tiles_s, split)](out, vals, {args}, M, R, N, M * N, tiles_s, rs, BLOCK_R=bc, "
             f"**tile_kw, num_warps={cfg['num_warps']})", "return out"]
    return head + [SPLIT_WHEN] + ["    " + ln for ln in body]
