"""Split reductions: when a reduction has too few independent tiles to fill the GPU (a sum over
dim 0 of a tall matrix, a full reduction), the reduced extent R is cut into SPLIT slices.
`_kiln_row_split` reduces each (tile, slice) into a workspace [SPLIT, M*N] (fp64 for sums);
`_kiln_row_finish` combines the slices with the same reduction and applies the epilogue.
Only for a single reduction whose result is the output (sum/mean/max/min with elementwise ops
before and after); softmax-like outputs keep the one-pass/looped kernels."""

from __future__ import annotations

from kiln.agents.builtin.gen_row import RowKernel
from kiln.agents.builtin.plan import Plan

FILL = {"sum": "0.0", "max": '-float("inf")', "min": 'float("inf")'}
RED = {"sum": "tl.sum", "max": "tl.max", "min": "tl.min"}


def splittable(plan: Plan, layout: str) -> bool:
    reds = [i for i in plan.live if plan.g.nodes[i].kind == "reduce"]
    return len(reds) == 1 and RowKernel(plan, layout, False, "").cls[plan.g.out] == "red"


def _ws_off(layout: str, s: str) -> tuple[str, str]:
    if layout == "rows":
        return f"tl.cast({s}, tl.int64) * M + rows", "row_ok"
    return f"(tl.cast({s}, tl.int64) * M + m) * N + ncol", "n_ok"


def split_kernels(plan: Plan, layout: str, sfx: str = "") -> str:
    k = RowKernel(plan, layout, True, "")
    red = next(i for i in plan.live if plan.g.nodes[i].kind == "reduce")
    op = plan.g.nodes[red].op
    off, ok = _ws_off(layout, "s")
    # long slices of a sum accumulate in fp64 (free in a memory-bound kernel): fp32 partial sums of
    # thousands of rows drift from PyTorch's by more than fp32's 1e-4 tolerance where outputs cancel
    body = k._setup() + k._pass(1, [red], set(), rng="s * RS, tl.minimum(s * RS + RS, R)", epilogue=False,
                                sum_acc="tl.float64")
    body.append(f"tl.store(ws_ptr + {off}, v{red}, mask={ok})")
    tile = "ROWS: tl.constexpr" if layout == "rows" else "BLOCK_N: tl.constexpr"
    ptrs = ", ".join(f"p{j}" for j in range(len(plan.loads)))
    split = (
        f"\n\n@triton.jit\ndef _kiln_row_split{sfx}(ws_ptr, {ptrs}, M, R, N, ntiles, RS, BLOCK_R: tl.constexpr, {tile}):\n"
        "    pid = tl.program_id(0)\n    s = tl.program_id(1)\n"
        "    for t in range(pid, ntiles, tl.num_programs(0)):\n" + "\n".join("        " + ln for ln in body) + "\n"
    )
    sidx = "tl.arange(0, SP)[None, :]" if layout == "rows" else "tl.arange(0, SP)[:, None]"
    off, ok = _ws_off(layout, "sidx")
    fin = k._setup() + [
        f"sidx = {sidx}",
        f"w = tl.load(ws_ptr + {off}, mask=(sidx < SPLIT) & {ok}, other={FILL[op]})",
        f"v{red} = {RED[op]}(w, axis={k.axis}, keep_dims=True)",
    ]
    fin += [ln for i in plan.live if k.cls[i] == "red" and plan.g.nodes[i].kind == "op" for ln in [_op(plan, i)]]
    fin.append(k._store(f"v{plan.g.out}" if plan.g.nodes[plan.g.out].kind != "const" else "0.0"))
    finish = (
        f"\n\n@triton.jit\ndef _kiln_row_finish{sfx}(out_ptr, ws_ptr, M, R, N, ntiles, SPLIT, SP: tl.constexpr, {tile}):\n"
        "    pid = tl.program_id(0)\n"
        "    for t in range(pid, ntiles, tl.num_programs(0)):\n" + "\n".join("        " + ln for ln in fin) + "\n"
    )
    return split + finish


def _op(plan: Plan, i: int) -> str:
    from kiln.agents.builtin.emit import op_line

    return op_line(plan, i)


def split_setup(layout: str, cfg: dict) -> tuple[list[str], list[str]]:
    """(head, sizing): forward lines both split paths share. The head sets the slice length bc and
    the tile count; the sizing, under `SPLIT_WHEN`, cuts R into `split` slices of rs elements."""
    if layout == "rows":
        head = [f"bc, tiles_s, tile_kw = {cfg['chunk']}, M, {{'ROWS': 1}}"]
    else:
        head = [
            f"bn_s = min({cfg['block_n']}, triton.next_power_of_2(N))",
            f"bc, tiles_s, tile_kw = max(1, {cfg['tile']} // bn_s), M * triton.cdiv(N, bn_s), {{'BLOCK_N': bn_s}}",
        ]
    sizing = [
        "nsm = _kiln_sm_count(out.device)",
        "split = min(triton.cdiv(R, bc), triton.cdiv(4 * nsm, tiles_s))",
        "rs = triton.cdiv(triton.cdiv(R, split), bc) * bc",
        "split = triton.cdiv(R, rs)",
    ]
    return head, sizing


SPLIT_WHEN = "if tiles_s < 2 * _kiln_sm_count(out.device) and R >= 2 * bc:"


def split_forward(layout: str, cfg: dict, nin: int, sfx: str = "") -> list[str]:
    """Forward lines that run the split path when the tiles cannot fill the device."""
    args = ", ".join(f"t{k}" for k in range(nin))
    head, sizing = split_setup(layout, cfg)
    body = sizing + [
        "ws = torch.empty((split, M * N), device=out.device, dtype=torch.float64)",
        f"_kiln_row_split{sfx}[(tiles_s, split)](ws, {args}, M, R, N, tiles_s, rs, BLOCK_R=bc, **tile_kw, "
        f"num_warps={cfg['num_warps']})",
        f"_kiln_row_finish{sfx}[(tiles_s,)](out, ws, M, R, N, tiles_s, split, SP=triton.next_power_of_2(split), **tile_kw, "
        "num_warps=4)",
        "return out",
    ]
    return head + [SPLIT_WHEN] + ["    " + ln for ln in body]
