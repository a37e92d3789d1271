"""Scaled dot-product attention: softmax(Q K^T * scale [+ causal mask]) V over (..., S, D) tensors.

- `_kiln_attn_flash` (head dims up to 128): flash attention. A program owns BLOCK_M queries of
  one (batch, head); it streams the keys and values in BLOCK_N blocks, keeps a running row max m
  and sum l (online softmax, in base 2: exp2 of scores pre-scaled by log2(e)), rescales its fp32
  output accumulator when the max grows, and divides by l once at the end. Q is read once, K and
  V once per query block; the S x S scores never reach memory.
- Larger head dims (KernelBench's 97 has D = 1024) do not fit a query block's accumulator in
  registers, so three kernels run instead: `_kiln_attn_scores` (a batched GEMM writing the scaled,
  masked scores), `_kiln_attn_softmax` (row softmax in place: max and sum in one pass, then the
  write) and `_kiln_attn_pv` (the batched GEMM P V).
fp32 uses `input_precision="tf32x3"` in every dot (fp32-level accuracy); bf16/fp16 a plain dot.
"""

from __future__ import annotations

from kiln.agents.builtin.emit import input_exprs
from kiln.agents.builtin.plan import Plan

FLASH = """
@triton.jit
def _kiln_attn_flash(q_ptr, k_ptr, v_ptr, o_ptr, SQ, SK, DQ, DV, sqb, sqs, sqd, skb, sks, skd, svb, svs, svd,
                     qk_scale, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, PREC: tl.constexpr):
    pid_m = tl.program_id(0)
    b = tl.program_id(1).to(tl.int64)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, BLOCK_D)
    rv = tl.arange(0, BLOCK_DV)
    q = tl.load(q_ptr + b * sqb + rm[:, None] * sqs + rd[None, :] * sqd, mask=(rm < SQ)[:, None] & (rd < DQ)[None, :],
                other=0.0)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_DV), tl.float32)
    hi = tl.minimum(SK, (pid_m + 1) * BLOCK_M) if CAUSAL else SK
    for n0 in range(0, hi, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        kt = tl.load(k_ptr + b * skb + rn[None, :] * sks + rd[:, None] * skd, mask=(rn < SK)[None, :] & (rd < DQ)[:, None],
                     other=0.0)
        s = tl.dot(q, kt, input_precision=PREC) * qk_scale
        keep = (rn < SK)[None, :]
        if CAUSAL:
            keep = keep & (rn[None, :] <= rm[:, None])
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + b * svb + rn[:, None] * svs + rv[None, :] * svd, mask=(rn < SK)[:, None] & (rv < DV)[None, :],
                    other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PREC)
        m_i = m_new
    out = acc / l_i[:, None]
    o_off = (b * SQ + rm[:, None]) * DV + rv[None, :]
    tl.store(o_ptr + o_off, out.to(o_ptr.dtype.element_ty), mask=(rm < SQ)[:, None] & (rv < DV)[None, :])
"""

SCORES = """
@triton.jit
def _kiln_attn_scores(q_ptr, k_ptr, s_ptr, SQ, SK, DQ, sqb, sqs, sqd, skb, sks, skd, scale, CAUSAL: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PREC: tl.constexpr):
    pid = tl.program_id(0)
    b = tl.program_id(1).to(tl.int64)
    tiles_n = tl.cdiv(SK, BLOCK_N)
    rm = (pid // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = (pid % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k0 in range(0, DQ, BLOCK_K):
        kk = k0 + rk
        q = tl.load(q_ptr + b * sqb + rm[:, None] * sqs + kk[None, :] * sqd, mask=(rm < SQ)[:, None] & (kk < DQ)[None, :],
                    other=0.0)
        kt = tl.load(k_ptr + b * skb + rn[None, :] * sks + kk[:, None] * skd, mask=(rn < SK)[None, :] & (kk < DQ)[:, None],
                     other=0.0)
        acc = tl.dot(q, kt, acc, input_precision=PREC)
    acc = acc * scale
    if CAUSAL:
        acc = tl.where(rn[None, :] <= rm[:, None], acc, float("-inf"))
    off = (b * SQ + rm[:, None]) * SK + rn[None, :]
    tl.store(s_ptr + off, acc, mask=(rm < SQ)[:, None] & (rn < SK)[None, :])


@triton.jit
def _kiln_attn_softmax(s_ptr, SK, BLOCK: tl.constexpr):
    row = s_ptr + tl.program_id(0).to(tl.int64) * SK
    r = tl.arange(0, BLOCK)
    m = tl.full((BLOCK,), float("-inf"), tl.float32)
    l = tl.zeros((BLOCK,), tl.float32)
    for c in range(0, SK, BLOCK):
        x = tl.load(row + c + r, mask=c + r < SK, other=float("-inf"))
        m_new = tl.maximum(m, x)
        l = l * tl.where(m_new == float("-inf"), 1.0, tl.exp(m - m_new)) + tl.where(x == float("-inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    mx = tl.max(m, axis=0)
    total = tl.sum(l * tl.where(m == float("-inf"), 0.0, tl.exp(m - mx)), axis=0)
    for c in range(0, SK, BLOCK):
        x = tl.load(row + c + r, mask=c + r < SK, other=float("-inf"))
        tl.store(row + c + r, tl.exp(x - mx) / total, mask=c + r < SK)


@triton.jit
def _kiln_attn_pv(p_ptr, v_ptr, o_ptr, SQ, SK, DV, svb, svs, svd, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PREC: tl.constexpr):
    pid = tl.program_id(0)
    b = tl.program_id(1).to(tl.int64)
    tiles_n = tl.cdiv(DV, BLOCK_N)
    pid_m = pid // tiles_n
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = (pid % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    hi = tl.minimum(SK, (pid_m + 1) * BLOCK_M) if CAUSAL else SK
    for k0 in range(0, hi, BLOCK_K):
        kk = k0 + rk
        p = tl.load(p_ptr + (b * SQ + rm[:, None]) * SK + kk[None, :], mask=(rm < SQ)[:, None] & (kk < SK)[None, :],
                    other=0.0)
        v = tl.load(v_ptr + b * svb + kk[:, None] * svs + rn[None, :] * svd, mask=(kk < SK)[:, None] & (rn < DV)[None, :],
                    other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=PREC)
    off = (b * SQ + rm[:, None]) * DV + rn[None, :]
    tl.store(o_ptr + off, acc.to(o_ptr.dtype.element_ty), mask=(rm < SQ)[:, None] & (rn < DV)[None, :])
"""


def attn_forward(plan: Plan, cfg: dict) -> str:
    q, k, v = input_exprs(plan)[:3]
    causal, scale = bool(plan.g.nodes[plan.special].params[0]), plan.g.nodes[plan.special].params[1]
    scale_expr = f"{scale!r}" if scale else "1.0 / math.sqrt(DQ)"
    bm, bn, nw, ns = cfg["block_m"], cfg["block_n"], cfg["num_warps"], cfg["num_stages"]
    return "\n".join([
        f"q, k, v = {q}, {k}, {v}",
        "SQ, DQ, SK, DV = q.shape[-2], q.shape[-1], k.shape[-2], v.shape[-1]",
        "q3, k3, v3 = q.reshape(-1, SQ, DQ), k.reshape(-1, SK, DQ), v.reshape(-1, SK, DV)",
        "B = q3.shape[0]",
        "out = torch.empty(tuple(q.shape[:-1]) + (DV,), device=q.device, dtype=q.dtype)",
        "if out.numel() == 0:\n    return out",
        f"scale = {scale_expr}",
        f"prec = {cfg['prec']!r} if q.dtype == torch.float32 else 'tf32'",
        f"if DQ <= {cfg['flash_max_d']} and DV <= {cfg['flash_max_d']}:",
        "    bd, bdv = max(16, triton.next_power_of_2(DQ)), max(16, triton.next_power_of_2(DV))",
        f"    bm = min({bm}, 64) if max(bd, bdv) > 64 else {bm}",  # Q and the accumulator stay in registers
        f"    bn = min({bn}, 32) if max(bd, bdv) > 64 else {bn}",
        f"    nw = max({nw}, 8) if max(bd, bdv) > 64 else {nw}",
        "    grid = (triton.cdiv(SQ, bm), B)",
        "    _kiln_attn_flash[grid](q3, k3, v3, out, SQ, SK, DQ, DV, *q3.stride(), *k3.stride(), *v3.stride(), "
        f"scale * 1.4426950408889634, CAUSAL={causal}, BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=bd, BLOCK_DV=bdv, PREC=prec, "
        f"num_warps=nw, num_stages={ns})",
        "    return out",
        "s = torch.empty((B, SQ, SK), device=q.device, dtype=torch.float32)",
        f"grid = (triton.cdiv(SQ, {bm}) * triton.cdiv(SK, {bn}), B)",
        f"_kiln_attn_scores[grid](q3, k3, s, SQ, SK, DQ, *q3.stride(), *k3.stride(), scale, CAUSAL={causal}, "
        f"BLOCK_M={bm}, BLOCK_N={bn}, BLOCK_K=32, PREC=prec, num_warps={nw}, num_stages={ns})",
        f"_kiln_attn_softmax[(B * SQ,)](s, SK, BLOCK=min({cfg['softmax_block']}, triton.next_power_of_2(SK)), num_warps=4)",
        f"grid = (triton.cdiv(SQ, {bm}) * triton.cdiv(DV, {bn}), B)",
        f"_kiln_attn_pv[grid](s, v3, out, SQ, SK, DV, *v3.stride(), CAUSAL={causal}, BLOCK_M={bm}, BLOCK_N={bn}, "
        f"BLOCK_K=32, PREC=prec, num_warps={nw}, num_stages={ns})",
        "return out",
    ])  # fmt: skip


def attn_parts(plan: Plan, cfg: dict) -> tuple[str, str, str]:
    return FLASH + SCORES, attn_forward(plan, cfg), "\nimport math\n"
