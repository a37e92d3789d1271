"""Matmul / linear template with a fused elementwise epilogue (bias, activations, residuals).

Tiles of BLOCK_M x BLOCK_N accumulate in fp32 with tl.dot over BLOCK_K slices. Programs are
ordered in groups of GROUP_M rows of tiles so neighbouring programs reuse the same B columns
from L2. A and B row/column offsets wrap modulo M/N (always in bounds), so only the K tail is
masked on loads. fp32 inputs use `tf32x3` (three TF32 products, fp32-level accuracy; `prec: auto`
takes one TF32 product instead where the writer's `torch.backends.cuda.matmul.allow_tf32` is on,
off by default) or `ieee`.
The epilogue reads bias vectors along N and full (M, N) tensors, then stores once.
"""

from __future__ import annotations

from kiln.agents.builtin.emit import expr, input_exprs, op_line
from kiln.agents.builtin.plan import Plan
from kiln.agents.builtin.space import fp32_dot


def mm_kernel(plan: Plan) -> str:
    extra = plan.loads[2:]
    ptrs = "".join(f", p{k + 2}" for k in range(len(extra)))
    lines = [
        "pid = tl.program_id(0)",
        "pid_b = tl.program_id(1).to(tl.int64)  # the batch of a bmm (0 otherwise)",
        "pid_k = tl.program_id(2)  # the K slice (split-K; 0 otherwise)",
        "a_ptr += pid_b * sab",
        "b_ptr += pid_b * sbb",
        "ob = pid_b * M * N",
        "num_pid_m = tl.cdiv(M, BLOCK_M)",
        "num_pid_n = tl.cdiv(N, BLOCK_N)",
        "in_group = GROUP_M * num_pid_n",
        "first_m = (pid // in_group) * GROUP_M",
        "group_m = min(num_pid_m - first_m, GROUP_M)",
        "pid_m = first_m + ((pid % in_group) % group_m)",
        "pid_n = (pid % in_group) // group_m",
        "rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        "rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
        "rk = tl.arange(0, BLOCK_K)",
        "am = (rm % M).to(tl.int64)",
        "bn = (rn % N).to(tl.int64)",
        "k0 = pid_k.to(tl.int64) * KS",
        "k_len = min(KS, K - k0)",
        "a_ptrs = a_ptr + am[:, None] * sam + (k0 + rk[None, :]) * sak",
        "b_ptrs = b_ptr + (k0 + rk[:, None]) * sbk + bn[None, :] * sbn",
        "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
        "for k in range(0, tl.cdiv(k_len, BLOCK_K)):",
        "    if EVEN_K:  # every slice a whole number of BLOCK_K steps: unmasked, so the loads vectorise along K",
        "        a = tl.load(a_ptrs)",
        "        b = tl.load(b_ptrs)",
        "    else:",
        "        k_left = k_len - k * BLOCK_K",
        "        a = tl.load(a_ptrs, mask=rk[None, :] < k_left, other=0.0)",
        "        b = tl.load(b_ptrs, mask=rk[:, None] < k_left, other=0.0)",
        "    acc = tl.dot(a, b, acc, input_precision=PREC)",
        "    a_ptrs += BLOCK_K * sak",
        "    b_ptrs += BLOCK_K * sbk",
        "rm2 = rm[:, None]",
        "rn2 = rn[None, :]",
        "mask = (rm2 < M) & (rn2 < N)",
        "if SPLIT_K > 1:  # this slice's partial sum; _kiln_mm_reduce adds the slices and runs the epilogue",
        "    tl.store(ws_ptr + (pid_k * NB + pid_b) * M * N + rm2.to(tl.int64) * N + rn2, acc, mask=mask)",
        "else:",
        f"    v{plan.mm} = acc",
    ]
    lines += ["    " + ln for ln in _epilogue(plan) + [_store(plan)]]
    reduce = [
        "pid = tl.program_id(0)",
        "pid_b = tl.program_id(1).to(tl.int64)",
        "ob = pid_b * M * N",
        "num_pid_n = tl.cdiv(N, BLOCK_N)",
        "rm = (pid // num_pid_n) * BLOCK_M + tl.arange(0, BLOCK_M)",
        "rn = (pid % num_pid_n) * BLOCK_N + tl.arange(0, BLOCK_N)",
        "rm2 = rm[:, None]",
        "rn2 = rn[None, :]",
        "mask = (rm2 < M) & (rn2 < N)",
        "at = rm2.to(tl.int64) * N + rn2",
        "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
        "for s in range(0, SPLIT_K):  # in slice order: the same sum every run",
        "    acc += tl.load(ws_ptr + (s * NB + pid_b) * M * N + at, mask=mask, other=0.0).to(tl.float32)",
        f"v{plan.mm} = acc",
    ] + _epilogue(plan) + [_store(plan)]
    sig = f"out_ptr{ptrs}, ws_ptr, M, N, K, NB"
    return (
        "\n\n@triton.jit\n"
        f"def _kiln_mm(a_ptr, b_ptr, {sig}, KS, sam, sak, sbk, sbn, sab, sbb, BLOCK_M: tl.constexpr, "
        "BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, SPLIT_K: tl.constexpr, "
        "PREC: tl.constexpr, EVEN_K: tl.constexpr):\n"
        + "\n".join("    " + ln for ln in lines) + "\n"
        + GEMV_KERNEL
        + "\n\n@triton.jit\n"
        f"def _kiln_mm_reduce({sig}, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT_K: tl.constexpr):\n"
        + "\n".join("    " + ln for ln in reduce) + "\n"
    )


GEMV_KERNEL = """

@triton.jit
def _kiln_gemv(m_ptr, v_ptr, ws_ptr, R, K, KS, s_row, s_vec, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    # one slice of K for BLOCK_M rows of a row-major matrix (K contiguous) times a vector, in fp32 FMA;
    # the slice's partial dot products go to ws[slice, row] (the reduce kernel adds them and runs the epilogue)
    pid_m = tl.program_id(0)
    pid_k = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rk = tl.arange(0, BLOCK_K)
    k0 = pid_k.to(tl.int64) * KS
    k_len = min(KS, K - k0)
    m_ptrs = m_ptr + (rm % R).to(tl.int64)[:, None] * s_row + (k0 + rk[None, :])
    v_ptrs = v_ptr + (k0 + rk) * s_vec
    acc = tl.zeros((BLOCK_M, BLOCK_K), dtype=tl.float32)
    for k in range(0, k_len // BLOCK_K):  # whole steps unmasked: 16-byte loads of the matrix
        acc += tl.load(m_ptrs).to(tl.float32) * tl.load(v_ptrs).to(tl.float32)[None, :]
        m_ptrs += BLOCK_K
        v_ptrs += BLOCK_K * s_vec
    k_left = k_len % BLOCK_K
    if k_left > 0:
        x = tl.load(m_ptrs, mask=rk[None, :] < k_left, other=0.0).to(tl.float32)
        acc += x * tl.load(v_ptrs, mask=rk < k_left, other=0.0).to(tl.float32)[None, :]
    tl.store(ws_ptr + pid_k * R + rm, tl.sum(acc, axis=1), mask=rm < R)
"""
GEMV_TILE = (8, 512, 4)  # BLOCK_M, BLOCK_K, warps: 16 KB of the matrix a step per program


def _store(plan: Plan) -> str:
    return (f"tl.store(out_ptr + ob + rm2.to(tl.int64) * N + rn2, {expr(plan, plan.g.out)}.to(out_ptr.dtype.element_ty), "
            "mask=mask)")


def _epilogue(plan: Plan) -> list[str]:
    lines = []
    for i in plan.live:
        n = plan.g.nodes[i]
        if n.kind == "load" and i not in plan.loads[:2]:
            k = plan.loads.index(i)
            if plan.roles[i] == "vec_n":
                lines.append(f"v{i} = tl.load(p{k} + rn2, mask=rn2 < N, other=0.0).to(tl.float32)")
            else:
                lines.append(f"v{i} = tl.load(p{k} + ob + rm2.to(tl.int64) * N + rn2, mask=mask, other=0.0).to(tl.float32)")
        elif n.kind == "op":
            lines.append(op_line(plan, i))
    return lines


def mm_forward(plan: Plan, cfg: dict) -> str:
    names = input_exprs(plan)
    a_t = plan.g.inputs[plan.g.nodes[plan.loads[0]].input].transposed
    b_t = plan.g.inputs[plan.g.nodes[plan.loads[1]].input].transposed
    batched = len(plan.g.nodes[plan.loads[1]].shape) == 3
    if batched:  # (B, M, K) x (B, K, N): one grid row of tiles per batch, batch strides passed along
        lines = [f"a2, b2 = {names[0]}, {names[1]}", "nb, M, K = a2.shape", "N = b2.shape[2]",
                 "out = torch.empty((nb, M, N), device=a2.device, dtype=a2.dtype)", "a = a2",
                 "if out.numel() == 0:\n    return out"]
        strides = "a2.stride(1), a2.stride(2), b2.stride(1), b2.stride(2), a2.stride(0), b2.stride(0)"
    else:
        lines = [
            f"a, b = {names[0]}, {names[1]}",
            "a2 = a if a.dim() == 2 else a.reshape(-1, a.shape[-1])" if not a_t else "a2 = a.t()",
            "b2 = b.t()" if b_t else "b2 = b",
            "M, K = a2.shape",
            "N = b2.shape[1]",
            "out_shape = tuple(a.shape[:-1]) + (N,)" if not a_t else "out_shape = (M, N)",
            "out = torch.empty(out_shape, device=a.device, dtype=a.dtype)",
            "if out.numel() == 0:\n    return out",
        ]
        strides = "a2.stride(0), a2.stride(1), b2.stride(0), b2.stride(1), 0, 0"
    rest = [
        f"{'e' + str(k)} = {e} if {e}.is_contiguous() else {e}.contiguous()" for k, e in enumerate(names[2:])
    ]
    eargs = "".join(f", e{k}" for k in range(len(names) - 2))
    bm, bn, bk = cfg["block_m"], cfg["block_n"], cfg["block_k"]
    prec = fp32_dot(cfg["prec"])
    sms = cfg.get("sms", sm_count())
    gbm, gbk, gw = GEMV_TILE
    gemv = [] if batched else [
        # a GEMV is not a GEMM: a matrix (K contiguous) times a vector streams the matrix once, in fp32 FMA
        "gv = None",
        "if N == 1 and a2.stride(1) == 1:",
        "    gv = (a2, b2, M, a2.stride(0), b2.stride(0))",
        "elif M == 1 and b2.stride(0) == 1:  # a vector times a matrix: the rows of b2.t()",
        "    gv = (b2, a2, N, b2.stride(1), a2.stride(1))",
        "if gv is not None:",
        "    mat, vec, rows, s_row, s_vec = gv",
        f"    split = max(1, min(triton.cdiv(8 * {sms}, triton.cdiv(rows, {gbm})), triton.cdiv(K, 4 * {gbk})))",
        f"    ks = triton.cdiv(triton.cdiv(K, split), {gbk}) * {gbk}",
        "    split = triton.cdiv(K, ks)",
        "    ws = torch.empty((split, rows), device=out.device, dtype=torch.float32)",
        f"    _kiln_gemv[(triton.cdiv(rows, {gbm}), split)](mat, vec, ws, rows, K, ks, s_row, s_vec, "
        f"BLOCK_M={gbm}, BLOCK_K={gbk}, num_warps={gw})",
        "    grid = (triton.cdiv(M, 64) * triton.cdiv(N, 64), 1)",
        f"    _kiln_mm_reduce[grid](out{eargs}, ws, M, N, K, 1, BLOCK_M=64, BLOCK_N=64, SPLIT_K=split, num_warps=4)",
        "    return out",
    ]
    lines += rest + [
        f"prec = _kiln_f32_dot(a, K, {prec!r}) if a.dtype == torch.float32 else 'tf32'",
        *([] if batched else ["nb = 1"]),
        *gemv,
        # tiles clipped to the problem (a GEMV's N = 1 takes 16 columns, not 128; tl.dot needs 16)
        f"bm, bn, bk = _kiln_tile(M, {bm}), _kiln_tile(N, {bn}), _kiln_tile(K, {bk})",
        "tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)",
        # split-K where the tiles leave most of the GPU's SMs idle and K is long (GEMV, large K):
        # each slice keeps at least 4 BLOCK_K steps and 256 of K; the slices' partial sums go to a workspace
        f"split = max(1, min(triton.cdiv(2 * {sms}, tiles * nb), K // max(4 * bk, 256))) if 2 * tiles * nb <= {sms} else 1",
        # a split slice streams a long K through few tiles: 64-deep steps (3 stages fit shared memory);
        # 16-deep ones ran KernelBench's 256 x 256 over K = 524288 at 0.29x eager on the H200, 64 at 0.73x
        f"ns = {cfg['num_stages']}",
        "if split > 1 and bk < 64:",
        "    bk, ns = _kiln_tile(K, 64), 3",
        "ks = triton.cdiv(triton.cdiv(K, split), bk) * bk",
        "split = triton.cdiv(K, ks)",
        # fp32 through TF32 tensor cores wants B K-major: a row-major K x N B is copied K-major first
        # where the GEMM's work dwarfs the copy (H200, 4096^3 fp32 in tf32x3: 4.6 ms with B N-major,
        # 2.2 ms K-major, whatever A's layout; KernelBench level 1 problems 1, 16, 17, 18). Not for a
        # split-K GEMM: its few tiles stream B once (256 x 256 over K = 524288 ran 0.34x eager K-major,
        # 0.73x as given)
        "if a.dtype == torch.float32 and prec != 'ieee' and b2.stride(-2) != 1 and M >= 256 and split == 1:",
        "    b2 = b2.transpose(-1, -2).contiguous().transpose(-1, -2)",
        "ws = torch.empty((split, nb, M, N) if split > 1 else (1,), device=out.device, dtype=torch.float32)",
        "grid = (tiles, nb, split)",
        f"_kiln_mm[grid](a2, b2, out{eargs}, ws, M, N, K, nb, ks, {strides}, "
        f"BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M={cfg['group_m']}, SPLIT_K=split, PREC=prec, "
        "EVEN_K=K % ks == 0 and ks % bk == 0, "
        f"num_warps={cfg['num_warps']}, num_stages=ns)",
        "if split > 1:",
        "    grid = (triton.cdiv(M, 64) * triton.cdiv(N, 64), nb)",
        f"    _kiln_mm_reduce[grid](out{eargs}, ws, M, N, K, nb, BLOCK_M=64, BLOCK_N=64, SPLIT_K=split, num_warps=4)",
        "return out",
    ]
    return "\n".join(lines)


def sm_count() -> int:
    """SMs of the GPU the kernel is written on (0 without one: no split-K under the interpreter)."""
    import os

    import torch

    if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
        return 0
    return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


TILE_HELPER = """

def _kiln_tile(n, cap):
    # a power-of-two tile side: cap, or the smallest one >= n (at least 16, tl.dot's minimum)
    t = 16
    while t < n and t < cap:
        t *= 2
    return min(t, cap)
"""
