"""Pooling template: max / average pooling over 1, 2 or 3 spatial dims (kernel, stride, padding,
dilation, ceil_mode, count_include_pad, divisor_override) and adaptive average / max pooling to
any output size, with the elementwise epilogue fused.

Tensors are viewed as 5-D (n, c, d, h, w). A program owns BLOCK outputs of one (sample,
channel) as a BD x BH x BW patch (powers of two, filled along w first: the store and, at stride
1, every tap's load coalesce); the taps are unrolled (the kernel size is a compile-time constant), each a
masked load of the shifted patch (padding reads -inf for max, 0 for average), so every input
element is read from DRAM once and the rest of its reuse hits L1/L2. Average pooling divides by
PyTorch's divisor: the window clipped to the padded input (count_include_pad) or to the input.
Adaptive pooling: window [floor(o*I/O), ceil((o+1)*I/O)) per dim, at most MK taps per dim.
"""

from __future__ import annotations

from kiln.agents.builtin import gen_epilogue as E
from kiln.agents.builtin.emit import input_exprs
from kiln.agents.builtin.plan import Plan

HEAD = E.patch_head("c", "C") + """
base = x_ptr + n.to(tl.int64) * sxn + c.to(tl.int64) * sxc"""

WINDOW = """ds = od * SD - PD
hs = oh * SH - PH
ws = ow * SW - PW"""

TAPS = """for kd in tl.static_range(KD):
    idd = {d0} + kd{dstep}
    for kh in tl.static_range(KH):
        ih = {h0} + kh{hstep}
        for kw in tl.static_range(KW):
            iw = {w0} + kw{wstep}
            ok = m_ok & {inside}
            v = tl.load(base + idd * sxd + ih * sxh + iw * sxw, mask=ok, other={other}).to(tl.float32)
            acc = {combine}"""

AVG_DIVISOR = """if DIVISOR > 0:
    acc = acc / DIVISOR
else:
    de = tl.minimum(ds + KD, D + PD)
    he = tl.minimum(hs + KH, H + PH)
    we = tl.minimum(ws + KW, W + PW)
    padded = (de - ds) * (he - hs) * (we - ws)
    inner = (tl.minimum(de, D) - tl.maximum(ds, 0)) * (tl.minimum(he, H) - tl.maximum(hs, 0)) * (
        tl.minimum(we, W) - tl.maximum(ws, 0))
    acc = acc / tl.maximum(padded if COUNT_PAD else inner, 1).to(tl.float32)"""

ADAPTIVE_WINDOW = """ds = (od * D) // OD
de = ((od + 1) * D + OD - 1) // OD
hs = (oh * H) // OH
he = ((oh + 1) * H + OH - 1) // OH
ws = (ow * W) // OW
we = ((ow + 1) * W + OW - 1) // OW"""

TAIL = """v{anchor} = acc
{epilogue}
o_off = (n.to(tl.int64) * C + c) * (OD * OH * OW) + (od * OH + oh) * OW + ow
tl.store(out_ptr + o_off, {result}.to(out_ptr.dtype.element_ty), mask=m_ok)"""

RANGE = "(idd >= 0) & (idd < D) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)"
ARANGE = "(idd < de) & (ih < he) & (iw < we)"


def _kind(plan: Plan) -> str:
    return plan.g.nodes[plan.special].op


def _taps(kind: str) -> str:
    is_max = kind.endswith("max")
    combine = "tl.maximum(acc, v)" if is_max else "acc + v"
    other = "float('-inf')" if is_max else "0.0"
    if kind.startswith("adaptive"):
        return TAPS.format(d0="ds", h0="hs", w0="ws", dstep="", hstep="", wstep="", inside=ARANGE, other=other,
                           combine=combine)  # fmt: skip
    return TAPS.format(d0="ds", h0="hs", w0="ws", dstep=" * DD", hstep=" * DH", wstep=" * DW", inside=RANGE,
                       other=other, combine=combine)  # fmt: skip


def pool_kernel(plan: Plan) -> str:
    kind = _kind(plan)
    ptrs, estr = E.kernel_args(plan, 1)
    init = "acc = tl.full((BLOCK,), float('-inf'), tl.float32)" if kind.endswith("max") else "acc = tl.zeros((BLOCK,), tl.float32)"
    parts = [HEAD, ADAPTIVE_WINDOW if kind.startswith("adaptive") else WINDOW, init, _taps(kind)]
    if kind == "avg":
        parts.append(AVG_DIVISOR)
    elif kind == "adaptive_avg":
        parts.append("acc = acc / tl.maximum((de - ds) * (he - hs) * (we - ws), 1).to(tl.float32)")
    idx = {"n": "n", "c": "c", "d": "od", "h": "oh", "w": "ow"}
    parts.append(TAIL.format(anchor=plan.special, epilogue="\n".join(E.lines(plan, 1, idx, "m_ok", None)),
                             result=E.result(plan)))  # fmt: skip
    body = "\n".join("\n".join("    " + ln if ln else ln for ln in p.splitlines()) for p in parts)
    consts = ", ".join(f"{p}{d}: tl.constexpr" for p in ("K", "S", "P", "D") for d in "DHW")
    return (
        f"\n\n@triton.jit\ndef _kiln_pool(x_ptr, out_ptr{ptrs}, C, D, H, W, OD, OH, OW, TILES_D, TILES_H, TILES_W, "
        f"sxn, sxc, sxd, sxh, sxw{estr}, {consts}, COUNT_PAD: tl.constexpr, DIVISOR: tl.constexpr, "
        f"BLOCK: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr):\n{body}\n"
    )


def _ints(p: tuple[float, ...], a: int, b: int) -> tuple[int, ...]:
    return tuple(int(v) for v in p[a:b])


def _sizes(plan: Plan) -> list[str]:
    """Forward lines: output sizes and the constexpr launch arguments for this pooling."""
    p = plan.g.nodes[plan.special].params
    if _kind(plan).startswith("adaptive"):
        o = _ints(p, 1, 4)
        lines = [f"OD, OH, OW = {o[0]}, {o[1]}, {o[2]}"]
        lines += [f"{k} = triton.cdiv({i}, O{i}) + 1" for k, i in (("KD", "D"), ("KH", "H"), ("KW", "W"))]
        lines.append("consts = dict(KD=KD, KH=KH, KW=KW, SD=1, SH=1, SW=1, PD=0, PH=0, PW=0, DD=1, DH=1, DW=1, "
                     "COUNT_PAD=True, DIVISOR=0)")  # fmt: skip
        return lines
    k, s, pad, dil = (_ints(p, 1 + 3 * j, 4 + 3 * j) for j in range(4))
    ceil, cip, div = bool(p[13]), bool(p[14]), int(p[15])
    lines = [f"O{d} = _kiln_pool_out({d}, {k[j]}, {s[j]}, {pad[j]}, {dil[j]}, {ceil})" for j, d in enumerate("DHW")]
    kw = ", ".join(f"{n}{d}={v[j]}" for n, v in (("K", k), ("S", s), ("P", pad), ("D", dil)) for j, d in enumerate("DHW"))
    lines.append(f"consts = dict({kw}, COUNT_PAD={cip}, DIVISOR={div})")
    return lines


def pool_forward(plan: Plan, cfg: dict) -> str:
    nsp = int(plan.g.nodes[plan.special].params[0])
    batched = len(plan.g.nodes[plan.loads[0]].shape) == nsp + 2
    ebody, eptrs, estr = E.forward_lines(plan, 1, batched, nsp)
    dims = (["NB"] if batched else []) + ["C"] + ["OD", "OH", "OW"][3 - nsp :]
    blk = cfg["block"]
    return "\n".join([
        f"x5 = _kiln_view5({input_exprs(plan)[0]}, {batched}, {nsp})",
        "NB, C, D, H, W = x5.shape", *_sizes(plan),
        f"out = torch.empty(({', '.join(dims)},), device=x5.device, dtype=x5.dtype)",
        "if out.numel() == 0:\n    return out", *ebody,
        f"bd, bh, bw = _kiln_patch({blk}, OD, OH, OW)",
        "tiles_d, tiles_h, tiles_w = triton.cdiv(OD, bd), triton.cdiv(OH, bh), triton.cdiv(OW, bw)",
        "grid = (NB * C * tiles_d * tiles_h * tiles_w,)",
        f"_kiln_pool[grid](x5, out{eptrs}, C, D, H, W, OD, OH, OW, tiles_d, tiles_h, tiles_w, *x5.stride(){estr}, "
        f"**consts, BLOCK=bd * bh * bw, BH=bh, BW=bw, num_warps={cfg['num_warps']})",
        "return out",
    ])  # fmt: skip


HELPER = '''

def _kiln_pool_out(n, k, s, p, d, ceil):
    """PyTorch's pooled size: floor (or ceil) of the sliding range, a last window starting in the
    right padding dropped."""
    out = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil else 0)) // s + 1
    if ceil and (out - 1) * s >= n + p:
        out -= 1
    return out
'''


def pool_parts(plan: Plan, cfg: dict) -> tuple[str, str, str]:
    return pool_kernel(plan), pool_forward(plan, cfg), E.HELPER + HELPER
