"""Per-channel batch statistics (batch norm in training mode): mean and 1/sqrt(var + eps) of each
channel (dim 1) over every other dim, written as a (2, C) fp32 tensor; the normalisation itself
is an elementwise kernel after it (pipeline.py).

The input is viewed as (A, C, S): channel c's elements are A runs of S contiguous values.
- `_kiln_cs_partial` (grid C x SPLIT): each program reduces one slice of channel c, block by block,
  into (count, mean, M2) with Chan's parallel update (no E[x^2] - E[x]^2 cancellation); SPLIT is
  chosen so that there are ~4 programs per SM even when C is small (a GEMM's 1024 features, a
  conv's 16 channels).
- `_kiln_cs_finish` (grid C): combines the SPLIT partials, writes (mean, rstd) and, as torch does
  in training mode, updates running_mean / running_var (unbiased) and num_batches_tracked.
"""

from __future__ import annotations

from kiln.agents.builtin.emit import input_exprs
from kiln.agents.builtin.plan import Plan

KERNELS = """
@triton.jit
def _kiln_cs_partial(x_ptr, ws_ptr, A, C, S, CHUNK, SPLIT, BLOCK: tl.constexpr):
    c = tl.program_id(0)
    s = tl.program_id(1)
    total = A * S
    r = tl.arange(0, BLOCK)
    cnt = 0.0
    mean = 0.0
    m2 = 0.0
    for j0 in range(s * CHUNK, tl.minimum((s + 1) * CHUNK, total), BLOCK):
        j = j0 + r
        ok = j < tl.minimum((s + 1) * CHUNK, total)
        a = (j // S).to(tl.int64)
        x = tl.load(x_ptr + (a * C + c) * S + j % S, mask=ok, other=0.0).to(tl.float32)
        nb = tl.sum(ok.to(tl.float32), axis=0)
        mb = tl.sum(x, axis=0) / nb
        d = tl.where(ok, x - mb, 0.0)
        delta = mb - mean
        tot = cnt + nb
        mean = mean + delta * (nb / tot)
        m2 = m2 + tl.sum(d * d, axis=0) + delta * delta * (cnt * nb / tot)
        cnt = tot
    base = (c * SPLIT + s) * 3
    tl.store(ws_ptr + base, cnt)
    tl.store(ws_ptr + base + 1, mean)
    tl.store(ws_ptr + base + 2, m2)


@triton.jit
def _kiln_cs_finish(ws_ptr, stats_ptr, rm_ptr, rv_ptr, nbt_ptr, C, SPLIT, eps, momentum, RUNNING: tl.constexpr,
                    TRACK: tl.constexpr, SP: tl.constexpr):
    c = tl.program_id(0)
    i = tl.arange(0, SP)
    ok = i < SPLIT
    cnt = tl.load(ws_ptr + (c * SPLIT + i) * 3, mask=ok, other=0.0)
    mean_s = tl.load(ws_ptr + (c * SPLIT + i) * 3 + 1, mask=ok, other=0.0)
    m2_s = tl.load(ws_ptr + (c * SPLIT + i) * 3 + 2, mask=ok, other=0.0)
    n = tl.sum(cnt, axis=0)
    mean = tl.sum(cnt * mean_s, axis=0) / n
    dm = tl.where(cnt > 0, mean_s - mean, 0.0)
    var = (tl.sum(m2_s, axis=0) + tl.sum(cnt * dm * dm, axis=0)) / n
    tl.store(stats_ptr + c, mean)
    tl.store(stats_ptr + C + c, 1.0 / tl.sqrt(var + eps))
    if RUNNING:
        f = momentum
        if TRACK:
            done = tl.load(nbt_ptr)
            if momentum < 0:
                f = 1.0 / (done + 1).to(tl.float32)
        unbiased = var * (n / tl.maximum(n - 1.0, 1.0))
        rm = tl.load(rm_ptr + c).to(tl.float32)
        rv = tl.load(rv_ptr + c).to(tl.float32)
        tl.store(rm_ptr + c, ((1.0 - f) * rm + f * mean).to(rm_ptr.dtype.element_ty))
        tl.store(rv_ptr + c, ((1.0 - f) * rv + f * unbiased).to(rv_ptr.dtype.element_ty))
        if TRACK:
            if c == 0:
                tl.store(nbt_ptr, done + 1)
"""


def stats_forward(plan: Plan, cfg: dict) -> str:
    node = plan.g.nodes[plan.special]
    eps, mom, running, track = node.params[0], node.params[1], bool(node.params[2]), bool(node.params[3])
    names = input_exprs(plan)
    rm, rv = (names[1], names[2]) if running else ("stats", "stats")
    nbt = names[3] if track else "stats"
    blk = cfg["block"]
    return "\n".join([
        f"x = {names[0]}",
        "x = x if x.is_contiguous() else x.contiguous()",
        "A, C = x.shape[0], x.shape[1]",
        "S = x.numel() // max(1, A * C)",
        "stats = torch.empty((2, C), device=x.device, dtype=torch.float32)",
        "if x.numel() == 0:\n    return stats",
        f"split = max(1, min(triton.cdiv(4 * _kiln_sm_count(x.device), C), triton.cdiv(A * S, {blk})))",
        f"chunk = triton.cdiv(triton.cdiv(A * S, split), {blk}) * {blk}",
        "split = triton.cdiv(A * S, chunk)",
        "ws = torch.empty((C, split, 3), device=x.device, dtype=torch.float32)",
        f"_kiln_cs_partial[(C, split)](x, ws, A, C, S, chunk, split, BLOCK={blk}, num_warps={cfg['num_warps']})",
        f"_kiln_cs_finish[(C,)](ws, stats, {rm}, {rv}, {nbt}, C, split, {eps!r}, {mom!r}, RUNNING={running}, "
        "TRACK=" + str(track) + ", SP=triton.next_power_of_2(split), num_warps=1)",
        "return stats",
    ])  # fmt: skip


def stats_parts(plan: Plan, cfg: dict) -> tuple[str, str, str]:
    return KERNELS, stats_forward(plan, cfg), ""
