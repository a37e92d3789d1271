"""The row template's kernels for a plan (`row_kernels`: one-pass, looped and split, per layout),
and its ModelNew.forward: view the input as (M, R, N), allocate the output,
pick the kernel (split / one-pass / looped) from the run-time sizes and launch it.

When the reduced dim comes from a Model attribute (`dim=self.dim`), it is read at run time and
the layout follows it: N == 1 uses the rows kernels, otherwise the cols kernels."""

from __future__ import annotations

from kiln.agents.builtin.emit import contig, input_exprs
from kiln.agents.builtin.gen_row import RowKernel, layout_of
from kiln.agents.builtin.gen_split import split_forward, split_kernels, splittable
from kiln.agents.builtin.gen_split_levels import level_forward, level_kernels, multi_splittable
from kiln.agents.builtin.plan import Plan


def row_kernels(plan: Plan, cfg: dict | None = None) -> str:
    """The kernels for the traced layout; both layouts (suffixes _r, _c) when the reduced dim is
    a Model attribute (`dim=self.dim`) that other init inputs can change."""
    pairs = [("rows", "_r"), ("cols", "_c")] if plan.dim_attr else [(layout_of(plan), "")]
    out = ""
    for layout, sfx in pairs:
        evict = "evict_first" if (cfg or {}).get("evict", 1) else ""
        out += RowKernel(plan, layout, False, f"_kiln_row_onepass{sfx}", evict).source()
        out += RowKernel(plan, layout, True, f"_kiln_row_looped{sfx}").source()
        out += split_kernels(plan, layout, sfx) if splittable(plan, layout) else ""
        out += level_kernels(plan, layout, sfx) if multi_splittable(plan, layout) else ""
    return out


def row_forward(plan: Plan, cfg: dict) -> str:
    d0, d1 = plan.dims
    main = input_exprs(plan)[[plan.roles[i] for i in plan.loads].index("full")]
    if RowKernel(plan, layout_of(plan), False, "").cls[plan.g.out] == "full":
        oshape = "shape"
    elif len(plan.g.out_shape) == len(plan.full_shape):  # keepdim
        oshape = "shape[:d0] + (1,) * (d1 - d0 + 1) + shape[d1 + 1:]"
    else:
        oshape = "shape[:d0] + shape[d1 + 1:]"
    dims = f"d0 = d1 = self.{plan.dim_attr} % len(shape)" if plan.dim_attr else f"d0, d1 = {d0}, {d1}"
    lines = [
        contig(input_exprs(plan)),
        f"shape = tuple({main}.shape)",
        dims,
        "M, R, N = _kiln_prod(shape[:d0]), _kiln_prod(shape[d0:d1 + 1]), _kiln_prod(shape[d1 + 1:])",
        f"out = torch.empty({oshape}, device={main}.device, dtype={main}.dtype)",
        "if out.numel() == 0 or R == 0:\n    return out",
    ]
    if not plan.dim_attr:
        return "\n".join(lines + _launch(plan, cfg, layout_of(plan), ""))
    ind = ["    " + ln for ln in _launch(plan, cfg, "rows", "_r")]
    return "\n".join(lines + ["if N == 1:", *ind] + _launch(plan, cfg, "cols", "_c"))  # rows branch returns


def _launch(plan: Plan, cfg: dict, layout: str, sfx: str) -> list[str]:
    lines = split_forward(layout, cfg, len(plan.loads), sfx) if splittable(plan, layout) else []
    lines += level_forward(plan, layout, cfg, sfx) if multi_splittable(plan, layout) else []
    lines += _pick_rows(cfg, sfx) if layout == "rows" else _pick_cols(cfg, sfx)
    args = ", ".join(f"t{k}" for k in range(len(plan.loads)))
    tile = "ROWS=rows" if layout == "rows" else "BLOCK_N=bn"
    return lines + [
        f"grid = (min(ntiles, _kiln_sm_count(out.device) * {cfg['waves']}) if {bool(cfg['persistent'])} else ntiles,)",
        f"kernel[grid](out, {args}, M, R, N, ntiles, BLOCK_R=br, {tile}, num_warps=nw, num_stages={cfg['num_stages']})",
        "return out",
    ]


def _pick_rows(cfg: dict, sfx: str) -> list[str]:
    return [
        f"if R <= {cfg['onepass_max']}:",
        f"    kernel, br = _kiln_row_onepass{sfx}, triton.next_power_of_2(R)",
        f"    rows = max(1, min({cfg['tile']} // br, triton.next_power_of_2(M), 64))",
        "else:",
        f"    kernel, br, rows = _kiln_row_looped{sfx}, {cfg['chunk']}, 1",
        f"nw = max(1, min({cfg['num_warps']}, rows * br // 256))",
        "ntiles = triton.cdiv(M, rows)",
    ]


def _pick_cols(cfg: dict, sfx: str) -> list[str]:
    return [
        f"bn = min({cfg['block_n']}, triton.next_power_of_2(N))",
        f"if triton.next_power_of_2(R) * bn <= {cfg['tile']}:",
        f"    kernel, br = _kiln_row_onepass{sfx}, triton.next_power_of_2(R)",
        "else:",
        f"    kernel, br = _kiln_row_looped{sfx}, max(1, {cfg['tile']} // bn)",
        f"nw = max(1, min({cfg['num_warps']}, br * bn // 256))",
        "ntiles = M * triton.cdiv(N, bn)",
    ]
