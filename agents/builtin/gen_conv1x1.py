"""A 1x1 convolution (stride 1, padding 0, one group; 1-D, 2-D or 3-D; any dilation, which a 1x1
kernel never uses) as a batched GEMM on the NCDHW tensors in place: for each sample n,
out[n] (COUT x S) = W (COUT x CIN) @ x[n] (CIN x S), S the flattened positions, contiguous in both.
No relayout copy: the per-tap conv template moves the input to channels-innermost first (a full
extra read and write of the input), which on a memory-bound 1x1 conv (KernelBench's 87: 64 -> 128
channels) costs more than the GEMM.

A program owns BLOCK_M output channels of one sample and a run of PER consecutive tiles of BLOCK_N
positions. Channel blocks of one run are adjacent in launch order, so with COUT > BLOCK_M the
other blocks read the same x tiles from L2. With CIN <= 64 (ONE_K) the program loads its
BLOCK_M x CIN block of W once, and each x tile is one K step: the loop over position tiles is the
pipelined loop (Triton prefetches the next num_stages - 1 x tiles with async copies while the
current one is multiplied and stored), each x element read from DRAM once, each output written
once. Larger CIN runs a K loop per tile, as a plain GEMM.
fp32 uses `_kiln_f32_dot`'s precision (bf16x3 on a GPU with K >= 64, tf32x3 otherwise); the fused
elementwise epilogue (bias, activations, residuals) runs on the tile before its one store.
"""

from __future__ import annotations

from kiln.agents.builtin import gen_epilogue as E
from kiln.agents.builtin import space
from kiln.agents.builtin.emit import F32_DOT_HELPER, input_exprs
from kiln.agents.builtin.plan import Plan

ONE_K_MAX = 64
"""Input channels up to which W's block stays in the program and x tiles are single K steps: the
sm_90 compile of 128 x 128 x 64 (8 warps, 3 stages) holds 174 registers (bf16x3) / 186 (tf32x3),
no spills, 160 / 192 KB of shared memory; a 128-deep block would not fit two x tiles in flight."""

GENERAL_TILES = {"block_k": 16, "num_stages": 4}
"""The K loop's step and stages where the knobs are at the conv family's GPU defaults (32, 3): the
spill-free fp32 tile on sm_90 in both bf16x3 and tf32x3, as the matmul template's (128 x 128 x 32
holds 254 registers in bf16x3 and spills 8 bytes a thread in tf32x3, which pipeline stages use)."""

PER_MAX = 32
"""Position tiles a program runs at most: enough to amortise its first x tile's exposed latency,
few enough that the last wave is short (KernelBench's 87: 16 x 8192 tiles, 4096 programs)."""

KERNEL = """pid = tl.program_id(0)
pid_m = pid % TILES_M  # channel blocks of one run of positions are adjacent: x tiles shared in L2
t = pid // TILES_M
tiles_s = tl.cdiv(S, BLOCK_N)
chunks = tl.cdiv(tiles_s, PER)
chunk = t % chunks
n = (t // chunks).to(tl.int64)
rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
m_ok = rm < COUT
rk = tl.arange(0, BLOCK_K)
rn = tl.arange(0, BLOCK_N)
x_base = x_ptr + n * sxn
x_off = (rk.to(tl.int64) * sxc)[:, None] + (rn * sxs)[None, :]
w_off = rm[:, None] * swo + rk[None, :] * swi
if ONE_K:  # all of K in one tile: W's block is loaded (and split for bf16x3) once
    w = tl.load(w_ptr + w_off, mask=m_ok[:, None] & (rk[None, :] < CIN), other=0.0)
first = chunk * PER
for j in range(0, min(PER, tiles_s - first)):
    s0 = (first + j) * BLOCK_N
    rs = s0 + rn
    s_ok = rs < S
    x_s = x_base + s0.to(tl.int64) * sxs  # (n, channel 0, s0)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if ONE_K:  # x tile (CIN x BLOCK_N), rows contiguous along positions: 16-byte async copies
        xt = tl.load(x_s + x_off, mask=(rk[:, None] < CIN) & s_ok[None, :], other=0.0)
        acc = tl.dot(w, xt, acc, input_precision=PREC)
    else:  # a plain GEMM K loop; scalar base pointers step along K, the tile offsets stay
        w_k = w_ptr
        for k0 in range(0, CIN, BLOCK_K):
            k_ok = rk < CIN - k0
            a = tl.load(w_k + w_off, mask=m_ok[:, None] & k_ok[None, :], other=0.0)
            b = tl.load(x_s + x_off, mask=k_ok[:, None] & s_ok[None, :], other=0.0)
            acc = tl.dot(a, b, acc, input_precision=PREC)
            w_k += BLOCK_K * swi
            x_s += BLOCK_K * sxc
    mask = m_ok[:, None] & s_ok[None, :]
{positions}    v{anchor} = acc
{epilogue}
    o_off = rm[:, None].to(tl.int64) * S + rs[None, :]  # out is (NB, COUT, S) contiguous
    tl.store(out_ptr + n * COUT * S + o_off, {result}.to(out_ptr.dtype.element_ty), mask=mask)"""

POSITIONS = """    od = (rs // (OH * OW))[None, :]  # a broadcast epilogue input is read per (d, h, w)
    oh = ((rs // OW) % OH)[None, :]
    ow = (rs % OW)[None, :]
"""

# the autotune knob's (BLOCK_N positions, warps, stages): none spills on sm_90 (test_builtin_conv1x1)
TUNED = [(128, 8, 3), (64, 8, 3), (64, 4, 3), (128, 8, 4), (32, 4, 4)]
DECORATOR = (
    "\n\n@triton.autotune(configs=[triton.Config({'BLOCK_N': p}, num_warps=w, num_stages=s) for p, w, s in "
    f"{TUNED!r}], key=['CIN', 'COUT', 'S'])"
)


def applies(plan: Plan, q: dict) -> bool:
    """A conv this template covers: not transposed, one group, every kernel extent 1, stride 1,
    padding 0 (q: gen_conv.params)."""
    node = plan.g.nodes[plan.special]
    w = plan.g.nodes[plan.loads[1]].shape
    plain = all(k == 1 for k in w[2:]) and set(q["stride"]) == {1} and set(q["pad"]) == {0}
    return node.op == "conv" and q["groups"] == 1 and plain


def kernel(plan: Plan, name: str = "_kiln_conv1x1") -> str:
    ptrs, estr = E.kernel_args(plan, 2)
    bcast = "bcast" in plan.roles.values()
    idx = {"n": "n", "c": "rm[:, None]", "d": "od", "h": "oh", "w": "ow"}
    epi = E.lines(plan, 2, idx, "mask", "m_ok[:, None]")
    body = KERNEL.format(positions=POSITIONS if bcast else "", anchor=plan.special, result=E.result(plan),
                         epilogue="\n".join("    " + ln for ln in epi))  # fmt: skip
    return (
        f"\n\n@triton.jit\ndef {name}(x_ptr, w_ptr, out_ptr{ptrs}, CIN, COUT, S, OH, OW, TILES_M, PER, sxn, sxc, "
        f"sxs, swo, swi{estr}, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, "
        "ONE_K: tl.constexpr, PREC: tl.constexpr):\n" + "\n".join("    " + ln if ln else ln for ln in body.splitlines()) + "\n"
    )


def _tiles(cfg: dict) -> list[str]:
    """Tiles from the conv knobs, clipped to the shape: block_n (channels) is BLOCK_M, the GEMM's
    rows (min(COUT, 128) at the default, so one program's channels reuse each x tile); block_m
    (positions) is BLOCK_N; block_k the K step past ONE_K_MAX input channels."""
    d = space.DEFAULTS["conv"]
    general = {k: v if cfg[k] == d[k] else cfg[k] for k, v in GENERAL_TILES.items()}
    return [
        f"one_k = CIN <= {ONE_K_MAX}",
        f"bm = min({cfg['block_n']}, max(16, triton.next_power_of_2(COUT)))",
        f"bn = min({cfg['block_m']}, max(16, triton.next_power_of_2(S)))",
        f"bk = max(16, triton.next_power_of_2(CIN)) if one_k else min({general['block_k']}, triton.next_power_of_2(CIN))",
        f"ns = {cfg['num_stages']} if one_k else {general['num_stages']}",
        "tiles_m, tiles_s = triton.cdiv(COUT, bm), triton.cdiv(S, bn)",
        # runs of position tiles: up to PER_MAX a program while that leaves >= 8 programs per SM
        f"per = max(1, min({PER_MAX}, tiles_s, tiles_m * tiles_s * NB // (8 * _kiln_sm_count(x3.device))))",
    ]


def forward(plan: Plan, cfg: dict, nsp: int) -> str:
    names = input_exprs(plan)
    sp = ["OD", "OH", "OW"][3 - nsp :]
    lines = [f"x5 = _kiln_view5({names[0]}, True, {nsp})", f"w5 = _kiln_view5({names[1]}, True, {nsp})",
             "NB, CIN, OD, OH, OW = x5.shape", "COUT, S = w5.shape[0], OD * OH * OW",
             f"out = torch.empty((NB, COUT, {', '.join(sp)}), device=x5.device, dtype=x5.dtype)",
             "if out.numel() == 0:\n    return out",
             # a view for NCDHW, channels-last or a channel slice (positions one stride apart); else a copy
             "x3 = x5.reshape(NB, CIN, S)"]  # fmt: skip
    ebody, eptrs, estr = E.forward_lines(plan, 2, True, nsp)
    lines += ebody + _tiles(cfg)
    lines.append(f"prec = _kiln_f32_dot(x3, CIN, {cfg['prec']!r}) if x3.dtype == torch.float32 else 'tf32'")
    args = (f"(x3, w5, out{eptrs}, CIN, COUT, S, OH, OW, tiles_m, per, *x3.stride(), w5.stride(0), w5.stride(1)"
            f"{estr}, BLOCK_M=bm, BLOCK_K=bk, ONE_K=one_k, PREC=prec")  # fmt: skip
    plain = ["grid = (tiles_m * triton.cdiv(tiles_s, per) * NB,)",
             f"_kiln_conv1x1[grid]{args}, BLOCK_N=bn, num_warps={cfg['num_warps']}, num_stages=ns)", "return out"]  # fmt: skip
    if cfg.get("autotune"):  # BLOCK_N, warps and stages timed on a GPU; the grid follows BLOCK_N
        plain = ["if x3.is_cuda:",
                 "    grid = lambda meta: (tiles_m * triton.cdiv(triton.cdiv(S, meta['BLOCK_N']), per) * NB,)",
                 f"    _kiln_conv1x1_at[grid]{args})", "    return out", *plain]  # fmt: skip
    return "\n".join(lines + plain)


def parts(plan: Plan, cfg: dict, nsp: int) -> tuple[str, str, str]:
    """(kernels, forward body, helpers) of a 1x1 conv."""
    kern = kernel(plan)
    if cfg.get("autotune"):
        kern += kernel(plan, "_kiln_conv1x1_at").replace("\n\n@triton.jit\n", DECORATOR + "\n@triton.jit\n", 1)
    return kern, forward(plan, cfg, nsp), E.HELPER + F32_DOT_HELPER
