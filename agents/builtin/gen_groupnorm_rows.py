"""Group norm for few, long rows in ONE launch (diffusion UNets: batch 2 x 32 groups = 64 rows of
40960 elements, fewer rows than an H200 has SMs).

The split path (`gen_groupnorm.py`: a stats kernel, a workspace, an apply kernel) fills the GPU but
costs two launches and an allocation on the host, which at these sizes is more than the GPU's work
(a 10 MB tensor is ~3 us of DRAM traffic per pass). `_kiln_gn_rows` is one program per (sample,
group) row that walks its row twice in BLOCK chunks:
- pass 1, per lane, Welford's update (count, mean, M2 per lane: exact, no E[x^2] - E[x]^2
  cancellation), then the lanes combined with Chan's formula;
- pass 2 normalises, applies the affine weights and the epilogue, and stores; a row is 160 KB, so
  the second read of the whole tensor (10 MB at SD sizes) comes from L2 (50 MB on an H200).
One read from DRAM, one write, one launch. Up to ROWS_MAX_ELEMS elements in all: past that the split
path's GPU time wins over its second launch.
"""

from __future__ import annotations

from kiln.agents.builtin.gen_groupnorm_lines import _affine, _epilogue, _kernel, _load_x
from kiln.agents.builtin.plan import Plan

ROWS_MAX_ELEMS = 1 << 22
"""The one-launch path up to this many elements; past it the split path's GPU time wins over its
second launch (H200, fp32 + SiLU, 32 groups, batch 2: at 64x64 x 320 ch, 2.6 Mi elements, one launch
31.6 us a call against 70; at 128x128, 10.5 Mi, 104 us against 57: bench/gn_speed.py)."""


def rows_kernel(plan: Plan) -> str:
    ptrs = ", ".join(f"p{k}" for k in range(len(plan.loads)))
    x = plan.g.nodes[plan.special].args[0]
    body = ["row = tl.program_id(0)", "lanes = tl.arange(0, BLOCK)",
            "cnt = tl.zeros([BLOCK], dtype=tl.float32)", "mu = tl.zeros([BLOCK], dtype=tl.float32)",
            "m2 = tl.zeros([BLOCK], dtype=tl.float32)",
            "for start in range(0, R, BLOCK):",
            "    offs = start + lanes",
            *["    " + ln for ln in _load_x(plan)],
            "    cnt = cnt + mask.to(tl.float32)",
            f"    delta = tl.where(mask, v{x} - mu, 0.0)",
            "    mu = mu + delta / tl.maximum(cnt, 1.0)",
            f"    m2 = m2 + delta * tl.where(mask, v{x} - mu, 0.0)",
            "mean = tl.sum(cnt * mu, axis=0) / R",
            "dm = mu - mean",
            "rstd = tl.rsqrt((tl.sum(m2, axis=0) + tl.sum(cnt * dm * dm, axis=0)) / R + eps)",
            "for start in range(0, R, BLOCK):",
            "    offs = start + lanes",
            *["    " + ln for ln in _load_x(plan) + _affine(plan) + _epilogue(plan)]]
    return _kernel("_kiln_gn_rows", f"out_ptr, {ptrs}, R, HW, CG, G, eps, BLOCK: tl.constexpr", body)


def rows_launch(ts: str, eps: float, cfg: dict) -> list[str]:
    """Forward lines: when the rows are too few to fill the GPU, the one-launch kernel, and return.
    `shape`, `G`, `HW`, `CG`, `R`, `rows` and `out` are bound by gn_forward's lines before these."""
    return [  # one program streams a whole row: wide chunks and many warps keep its loads in flight
        f"if 2 * rows <= _kiln_sm_count(out.device) and rows * R <= {ROWS_MAX_ELEMS}:",
        f"    br = min({max(int(cfg['block']), 4096)}, triton.next_power_of_2(R))",
        f"    _kiln_gn_rows[(rows,)](out, {ts}, R, HW, CG, G, {eps!r}, BLOCK=br, "
        "num_warps=max(1, min(16, br // 256)))",
        "    return out",
    ]
