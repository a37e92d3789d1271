"""Convolution template: implicit GEMM on tensor cores (conv and transposed conv, any groups,
stride, padding, dilation, 1-D/2-D/3-D); depthwise convolutions are gen_dwconv.py.

Every tensor is viewed as 5-D (n, c, d, h, w). The GEMM: rows are output positions, columns
output channels of one group, K runs over (input channel, kernel tap). A program owns
BLOCK_M positions of one sample as a BD x BH x BW patch of (od, oh, ow) (powers of two, filled
along w first, so `ow` is contiguous in runs of BW and loads and stores coalesce; small planes
take several rows or depths per program) and BLOCK_N channels;
programs for the channel tiles of one patch are adjacent, so the patch is read from L2.

- conv, per tap (`FLAT` off, CIG >= 32): a single loop over (tap, channel block): the tap's input
  rows `oh*SH - PH + kh*DH` are computed once per step for the whole patch, the channels are a
  plain stride; masks are per position only.
- conv, flat K (`FLAT`, few input channels, e.g. RGB): K = CIG*KD*KH*KW is cut in BLOCK_K slices
  and each k is decomposed into (ci, kd, kh, kw): no MMA lanes are wasted on a 3-channel tap.
- transposed conv, gather form (no atomics, deterministic): output o receives input i through tap
  k when o = i*S - P + k*D. A program owns outputs of one phase (o mod S fixed per dim), so a tap
  is either valid for the whole patch or for none of it (a scalar test), and i = j + (r + P - k*D)/S
  is contiguous in the patch index j: only the ~K/S valid taps per dim are computed.
- a 1x1 conv with stride 1, padding 0 and one group is not this template: gen_conv1x1 runs it as a
  batched GEMM on the NCDHW tensors (no relayout).
fp32 uses `input_precision="tf32x3"` (three TF32 products: fp32-level accuracy); the search may
try `tf32` or `ieee`. bf16/fp16 use a plain dot; the accumulator is fp32. The epilogue (bias, activations, residuals) runs on the tile.
"""

from __future__ import annotations

import math

from kiln.agents.builtin import gen_conv1x1, space
from kiln.agents.builtin import gen_conv_tune as T
from kiln.agents.builtin import gen_epilogue as E
from kiln.agents.builtin.emit import F32_DOT_HELPER, input_exprs
from kiln.agents.builtin.plan import Plan

CONV_SETUP = """pid = tl.program_id(0)
g = tl.program_id(1)
tiles_n = tl.cdiv(COG, BLOCK_N)
pid_n = pid % tiles_n
t = pid // tiles_n
tw = t % TILES_W
t = t // TILES_W
th = t % TILES_H
t = t // TILES_H
td = t % TILES_D
t = t // TILES_D
{phases}n = t
rm = tl.arange(0, BLOCK_M)
jd = td * (BLOCK_M // (BH * BW)) + rm // (BH * BW)
jh = th * BH + (rm // BW) % BH
jw = tw * BW + rm % BW
{positions}m_ok = (od < OD) & (oh < OH) & (ow < OW)
rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
n_ok = rn < COG
rk = tl.arange(0, BLOCK_K)
x_base = x_ptr + n.to(tl.int64) * sxn + (g * CIG).to(tl.int64) * sxc
w_base = w_ptr + g.to(tl.int64) * swg
acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)"""

CONV_LOOP = """ih0 = oh * SH - PH
iw0 = ow * SW - PW
id0 = od * SD - PD
if FLAT:
    for k0 in range(0, CIG * KD * KH * KW, BLOCK_K):
        k = k0 + rk
        k_ok = k < CIG * KD * KH * KW
        ci = k // (KD * KH * KW)
        r = k % (KD * KH * KW)
        kd = r // (KH * KW)
        kh = (r // KW) % KH
        kw = r % KW
        idd = id0[:, None] + (kd * DD)[None, :]
        ih = ih0[:, None] + (kh * DH)[None, :]
        iw = iw0[:, None] + (kw * DW)[None, :]
        a_ok = (m_ok[:, None] & k_ok[None, :] & (idd >= 0) & (idd < D) & (ih >= 0) & (ih < H) & (iw >= 0)
                & (iw < W))
        a_off = (ci.to(tl.int64) * sxc)[None, :] + idd * sxd + ih * sxh + iw * sxw
        a = tl.load(x_base + a_off, mask=a_ok, other=0.0)
        b_off = (ci * swi + kd * swd + kh * swh + kw * sww)[:, None] + (rn * swo)[None, :]
        b = tl.load(w_base + b_off, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PREC)
else:
    nc = tl.cdiv(CIG, BLOCK_K)
    for it in range(KD * KH * KW * nc):
        tap = it // nc
        c = (it % nc) * BLOCK_K + rk
        kw = tap % KW
        kh = (tap // KW) % KH
        kd = tap // (KW * KH)
        idd = id0 + kd * DD
        ih = ih0 + kh * DH
        iw = iw0 + kw * DW
        m_in = m_ok & (idd >= 0) & (idd < D) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        c_ok = c < CIG
        a_off = (idd * sxd + ih * sxh + iw * sxw)[:, None] + (c.to(tl.int64) * sxc)[None, :]
        a = tl.load(x_base + a_off, mask=m_in[:, None] & c_ok[None, :], other=0.0)
        b_off = (c * swi)[:, None] + (rn * swo)[None, :] + (kd * swd + kh * swh + kw * sww)
        b = tl.load(w_base + b_off, mask=c_ok[:, None] & n_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PREC)"""

CONVT_FIRST = """{k}0 = K{D}
for t_ in tl.static_range(PER{D}):
    {k}0 = tl.where(((r{d} + P{D} - t_ * D{D}) % S{D} == 0) & ({k}0 == K{D}), t_, {k}0)"""

CONVT_LOOP = """{first_d}
{first_h}
{first_w}
for kd in range(kd0, KD, PERD):
    idd = jd + (rd + PD - kd * DD) // SD
    for kh in range(kh0, KH, PERH):
        ih = jh + (rh + PH - kh * DH) // SH
        for kw in range(kw0, KW, PERW):
            iw = jw + (rw + PW - kw * DW) // SW
            m_in = m_ok & (idd >= 0) & (idd < D) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            sp = idd * sxd + ih * sxh + iw * sxw
            for c0 in range(0, CIG, BLOCK_K):
                c = c0 + rk
                c_ok = c < CIG
                a = tl.load(x_base + sp[:, None] + (c.to(tl.int64) * sxc)[None, :],
                            mask=m_in[:, None] & c_ok[None, :], other=0.0)
                b_off = (c * swi)[:, None] + (rn * swo)[None, :] + (kd * swd + kh * swh + kw * sww)
                b = tl.load(w_base + b_off, mask=c_ok[:, None] & n_ok[None, :], other=0.0)
                acc = tl.dot(a, b, acc, input_precision=PREC)"""


def convt_loop() -> str:
    """The valid taps of a phase r are k = k0 + PER*t (PER = S / gcd(S, D)): k0, the first k with
    (r + P - k*D) % S == 0, is found among the first PER taps (K when there is none)."""
    firsts = {f"first_{d}": CONVT_FIRST.format(k=f"k{d}", d=d, D=d.upper()) for d in "dhw"}
    return CONVT_LOOP.format(**firsts)


CONV_STORE = """cg = g * COG + rn
mask = m_ok[:, None] & n_ok[None, :]
v{anchor} = acc
{epilogue}
o_off = (n.to(tl.int64) * COUT + cg[None, :].to(tl.int64)) * (OD * OH * OW) + ((od * OH + oh) * OW + ow)[:, None]
tl.store(out_ptr + o_off, {result}.to(out_ptr.dtype.element_ty), mask=mask)"""

SPATIAL = ", ".join(f"{p}{d}: tl.constexpr" for p in ("S", "P", "D", "K") for d in "DHW")


def _transposed(plan: Plan) -> bool:
    return plan.g.nodes[plan.special].op == "conv_transpose"


def indent(text: str, n: int = 4) -> str:
    return "\n".join(" " * n + ln if ln else ln for ln in text.splitlines())


def conv_kernel(plan: Plan) -> str:
    ptrs, estr = E.kernel_args(plan, 2)
    tr = _transposed(plan)
    phases = "rw = t % SW\nt = t // SW\nrh = t % SH\nt = t // SH\nrd = t % SD\nt = t // SD\n" if tr else ""
    positions = "od = rd + SD * jd\noh = rh + SH * jh\now = rw + SW * jw\n" if tr else "od = jd\noh = jh\now = jw\n"
    idx = {"n": "n", "c": "cg[None, :]", "d": "od[:, None]", "h": "oh[:, None]", "w": "ow[:, None]"}
    store = CONV_STORE.format(anchor=plan.special, epilogue="\n".join(E.lines(plan, 2, idx, "mask", "n_ok[None, :]")),
                              result=E.result(plan))  # fmt: skip
    body = "\n".join([CONV_SETUP.format(phases=phases, positions=positions), convt_loop() if tr else CONV_LOOP, store])
    name = "_kiln_convt" if tr else "_kiln_conv"
    return (
        f"\n\n@triton.jit\ndef {name}(x_ptr, w_ptr, out_ptr{ptrs}, CIN, D, H, W, COUT, OD, OH, OW, CIG, COG, "
        f"TILES_D, TILES_H, TILES_W, sxn, sxc, sxd, sxh, sxw, swi, swo, swd, swh, sww, swg{estr}, {SPATIAL}, "
        + ("PERD: tl.constexpr, PERH: tl.constexpr, PERW: tl.constexpr, " if tr else "") +
        "FLAT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BH: tl.constexpr, "
        "BW: tl.constexpr, "
        f"PREC: tl.constexpr):\n{indent(body)}\n"
    )


def params(plan: Plan) -> dict:
    p = plan.g.nodes[plan.special].params
    nsp, groups = int(p[0]), int(p[2])
    s, pad, dil, opad = (tuple(int(v) for v in p[3 + 3 * k : 6 + 3 * k]) for k in range(4))
    return {"nsp": nsp, "groups": groups, "stride": s, "pad": pad, "dil": dil, "opad": opad}


def spatial_kwargs(q: dict, tr: bool = False) -> str:
    kw = [f"{p}{d}={v}" for p, vals in (("S", q["stride"]), ("P", q["pad"]), ("D", q["dil"]))
          for d, v in zip("DHW", vals, strict=True)]  # fmt: skip
    per = [f"PER{d}={s // math.gcd(s, dl)}" for d, s, dl in zip("DHW", q["stride"], q["dil"], strict=True)] if tr else []
    return ", ".join(kw + ["KD=KD", "KH=KH", "KW=KW"] + per)


def out_sizes(q: dict, tr: bool) -> list[str]:
    lines = []
    for d, big, k in zip("DHW", ("D", "H", "W"), ("KD", "KH", "KW"), strict=True):
        i = "DHW".index(d)
        s, p, dl, op = q["stride"][i], q["pad"][i], q["dil"][i], q["opad"][i]
        if tr:
            lines.append(f"O{d} = ({big} - 1) * {s} - {2 * p} + {dl} * ({k} - 1) + {op} + 1")
        else:
            lines.append(f"O{d} = ({big} + {2 * p} - {dl} * ({k} - 1) - 1) // {s} + 1")
    return lines


def _pointwise(plan: Plan, q: dict) -> bool:
    w = plan.g.nodes[plan.loads[1]].shape
    plain = all(k == 1 for k in w[2:]) and set(q["stride"]) == {1} and set(q["pad"]) == {0}
    return plain and not _transposed(plan) and "bcast" not in plan.roles.values()


def conv_forward(plan: Plan, cfg: dict) -> str:
    q, tr = params(plan), _transposed(plan)
    cfg = _kind_cfg(cfg, tr)
    names = input_exprs(plan)
    nsp, G = q["nsp"], q["groups"]
    lines = [f"x5 = _kiln_view5({names[0]}, True, {nsp})", f"w5 = _kiln_view5({names[1]}, True, {nsp})",
             "NB, CIN, D, H, W = x5.shape"]  # fmt: skip
    if tr:
        lines += ["_, COG, KD, KH, KW = w5.shape", f"COUT, CIG = COG * {G}, CIN // {G}"]
    else:
        lines += ["COUT, CIG, KD, KH, KW = w5.shape", f"COG = COUT // {G}"]
    lines += out_sizes(q, tr)
    dims = ["NB", "COUT"] + ["OD", "OH", "OW"][3 - nsp :]
    lines += [f"out = torch.empty(({', '.join(dims)}), device=x5.device, dtype=x5.dtype)",
              "if out.numel() == 0:\n    return out"]  # fmt: skip
    if _pointwise(plan, q):  # a grouped 1x1 conv (one group: gen_conv1x1): positions are one contiguous run
        lines += ["if x5.is_contiguous():", "    x5 = x5.view(NB, CIN, 1, 1, D * H * W)",
                  "    D, H, W, OD, OH, OW = 1, 1, D * H * W, 1, 1, OD * OH * OW"]  # fmt: skip
    ebody, eptrs, estr = E.forward_lines(plan, 2, True, nsp)
    lines += ebody + _tiles(cfg, q, tr, _pointwise(plan, q)) + _channels_inner(tr)
    wst = "swi, swo = ws[1], ws[0]" if not tr else "swi, swo = ws[0], ws[1]"
    lines += ["ws = w5.stride()", wst, f"swg = {'CIG * swi' if tr else 'COG * swo'}",
              f"prec = _kiln_f32_dot(x5, CIG * KD * KH * KW{' // ' + str(math.prod(q['stride'])) if tr else ''}, "
              f"{cfg['prec']!r}) if x5.dtype == torch.float32 else 'tf32'",
              ]  # fmt: skip
    args = (f"(x5, w5, out{eptrs}, CIN, D, H, W, COUT, OD, OH, OW, CIG, COG, tiles_d, tiles_h, tiles_w, *x5.stride(), "
            f"swi, swo, ws[2], ws[3], ws[4], swg{estr}, {spatial_kwargs(q, tr)}, FLAT=flat, BLOCK_M=bm, BH=bh, BW=bw, "
            "PREC=prec, ")  # fmt: skip
    phases = f" * {math.prod(q['stride'])}" if tr else ""  # transposed: one program per output phase too
    rest = f"NB{phases} * tiles_d * tiles_h * tiles_w"
    return "\n".join(lines + T.launch(cfg, "_kiln_convt" if tr else "_kiln_conv", args, rest, q["groups"]))


CHAN_INNER_KERNEL = """

@triton.jit
def _kiln_chan_inner(out_ptr, x_ptr, C, S, sxn, sxc, BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr):
    # one sample's (C, S) plane, S contiguous, written as (S, C): a tile is read along S and written
    # along C (Triton moves it through shared memory), both coalesced
    n = tl.program_id(2).to(tl.int64)
    rc = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    rs = tl.program_id(0).to(tl.int64) * BLOCK_S + tl.arange(0, BLOCK_S)
    mask = (rc[:, None] < C) & (rs[None, :] < S)
    v = tl.load(x_ptr + n * sxn + rc[:, None].to(tl.int64) * sxc + rs[None, :], mask=mask)
    tl.store(out_ptr + n * S * C + rs[None, :] * C + rc[:, None], v, mask=mask)
"""

CHAN_INNER_HELPER = '''

def _kiln_cl5(x5):
    """x5 (n, c, d, h, w) as a view of the same shape whose channels are innermost in memory: x5
    itself when they already are, else one tiled transpose (a strided torch copy of a large NCDHW
    tensor is several times slower)."""
    NB, C, D, H, W = x5.shape
    if x5.stride(1) == 1 or C == 1:
        return x5
    S = D * H * W
    if not (x5.stride(4) == 1 and x5.stride(3) == W and x5.stride(2) == H * W):
        return x5.permute(0, 2, 3, 4, 1).contiguous().permute(0, 4, 1, 2, 3)
    out = torch.empty((NB, D, H, W, C), device=x5.device, dtype=x5.dtype)
    if out.numel():
        grid = (triton.cdiv(S, 64), triton.cdiv(C, 64), NB)
        _kiln_chan_inner[grid](out, x5, C, S, x5.stride(0), x5.stride(1), BLOCK_C=64, BLOCK_S=64, num_warps=4)
    return out.permute(0, 4, 1, 2, 3)
'''


def _channels_inner(tr: bool) -> list[str]:
    """The per-tap loops' K is the input channel: with the channels innermost in memory (one copy of
    the input, a no-op when it is channels-last already, and of the small weight) both MMA operands
    are K-major, as Hopper's TF32 tensor cores take them, and a tile's rows are 16-byte loads; NCDHW
    gives M-major positions and a weight read at a stride of KD*KH*KW (4-byte loads, 2026-12-03)."""
    w_in, w_out = ("1, 2, 3, 4, 0", "4, 0, 1, 2, 3") if tr else ("0, 2, 3, 4, 1", "0, 4, 1, 2, 3")
    return ["if not flat:",
            "    x5 = _kiln_cl5(x5)",
            f"    w5 = w5.permute({w_in}).contiguous().permute({w_out})"]


KIND_TILES = {"transposed": {"block_n": 64, "num_warps": 4}, "per_tap": {"block_k": 64}}
"""Where a knob is at the family's GPU default, the value that kind of conv takes instead (H200,
2026-12-04, 30 level-1 convs, channels innermost): transposed convs ran 1.0-1.48x faster with 64-wide
channel tiles on 4 warps (12 of 17 by >= 1.2x), the per-tap loops of plain convs 1.0-1.18x with 64
channels a K step (not a 1x1 conv: 64 channels are then its whole K, one step with no pipelining, 0.87x).
Transposed convs keep K steps of 32 (64 with the 4-warp tile halved 57, 61, 65 and 69),
and so does the flat loop (few input channels: 64 was 0.69x on a 3-channel 3-D conv)."""


def _kind_cfg(cfg: dict, tr: bool) -> dict:
    d = space.DEFAULTS["conv"]
    over = KIND_TILES["transposed"] if tr else {}
    return cfg | {k: v for k, v in over.items() if cfg.get(k) == d[k]}


def _tiles(cfg: dict, q: dict, tr: bool, pointwise: bool = False) -> list[str]:
    """Tile sizes from the knobs, clipped to the shape: BLOCK_N to the group's output channels,
    BLOCK_K to its input channels (or to CIG*taps in flat mode), the patch to the output."""
    s = q["stride"]
    sizes = [f"triton.cdiv(O{d}, {s[i]})" for i, d in enumerate("DHW")] if tr else ["OD", "OH", "OW"]
    flat = "False" if tr else f"CIG < {cfg['flat_below']}"
    at_default = cfg["block_k"] == space.DEFAULTS["conv"]["block_k"]
    tap_bk = KIND_TILES["per_tap"]["block_k"] if at_default and not tr and not pointwise else cfg["block_k"]
    return [
        f"QD, QH, QW = {', '.join(sizes)}",
        f"flat = {flat}",
        f"bn = min({cfg['block_n']}, max(16, triton.next_power_of_2(COG)))",
        f"bk = min({cfg['block_k']} if flat else {tap_bk}, max(16, triton.next_power_of_2(CIG * KD * KH * KW if flat else CIG)))",
        f"bd, bh, bw = _kiln_patch({cfg['block_m']}, QD, QH, QW)",
        "bm = bd * bh * bw",
        "tiles_d, tiles_h, tiles_w = triton.cdiv(QD, bd), triton.cdiv(QH, bh), triton.cdiv(QW, bw)",
    ]


def conv_parts(plan: Plan, cfg: dict) -> tuple[str, str, str]:
    q = params(plan)
    if gen_conv1x1.applies(plan, q):  # a batched GEMM on the NCDHW tensors, no relayout
        return gen_conv1x1.parts(plan, cfg, q["nsp"])
    kernel = conv_kernel(plan)
    helper = E.HELPER + CHAN_INNER_HELPER + F32_DOT_HELPER
    if cfg.get("autotune"):
        return kernel + T.tuned_copy(kernel) + CHAN_INNER_KERNEL, conv_forward(plan, cfg), helper + T.HELPER
    return kernel + CHAN_INNER_KERNEL, conv_forward(plan, cfg), helper
