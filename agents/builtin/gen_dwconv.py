"""Depthwise convolution (one input channel per group, C_out = MULT * C_in): a direct kernel, not a
GEMM (K would be the taps only). Shares the conv template's 5-D views, sizes and launch constants."""

from __future__ import annotations

from kiln.agents.builtin import gen_epilogue as E
from kiln.agents.builtin.emit import input_exprs
from kiln.agents.builtin.gen_conv import SPATIAL, indent, out_sizes, params, spatial_kwargs
from kiln.agents.builtin.plan import Plan

DW_BODY = E.patch_head("co", "COUT") + """
ci = co // MULT
x_base = x_ptr + n.to(tl.int64) * sxn + ci.to(tl.int64) * sxc
w_base = w_ptr + co * swo
acc = tl.zeros((BLOCK,), dtype=tl.float32)
for kd in tl.static_range(KD):
    idd = od * SD - PD + kd * DD
    for kh in tl.static_range(KH):
        ih = oh * SH - PH + kh * DH
        for kw in tl.static_range(KW):
            iw = ow * SW - PW + kw * DW
            ok = m_ok & (idd >= 0) & (idd < D) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            wv = tl.load(w_base + kd * swd + kh * swh + kw * sww).to(tl.float32)
            acc += tl.load(x_base + idd * sxd + ih * sxh + iw * sxw, mask=ok, other=0.0).to(tl.float32) * wv
v{anchor} = acc
{epilogue}
o_off = (n.to(tl.int64) * COUT + co) * (OD * OH * OW) + (od * OH + oh) * OW + ow
tl.store(out_ptr + o_off, {result}.to(out_ptr.dtype.element_ty), mask=m_ok)"""


def dw_kernel(plan: Plan) -> str:
    """Depthwise conv (one input channel per group, C_out = MULT * C_in): not a GEMM (K is the
    taps only). A program owns BLOCK positions of one (sample, output channel) as a BD x BH x BW
    patch; each tap is one scalar weight times a shifted, masked patch of the input."""
    ptrs, estr = E.kernel_args(plan, 2)
    idx = {"n": "n", "c": "co", "d": "od", "h": "oh", "w": "ow"}
    body = DW_BODY.format(anchor=plan.special, epilogue="\n".join(E.lines(plan, 2, idx, "m_ok", None)), result=E.result(plan))
    return (
        f"\n\n@triton.jit\ndef _kiln_dwconv(x_ptr, w_ptr, out_ptr{ptrs}, D, H, W, COUT, OD, OH, OW, MULT, TILES_D, "
        f"TILES_H, TILES_W, sxn, sxc, sxd, sxh, sxw, swo, swd, swh, sww{estr}, {SPATIAL}, BLOCK: tl.constexpr, "
        f"BH: tl.constexpr, BW: tl.constexpr):\n{indent(body)}\n"
    )


def dw_forward(plan: Plan, cfg: dict) -> str:
    q = params(plan)
    names = input_exprs(plan)
    nsp, G = q["nsp"], q["groups"]
    ebody, eptrs, estr = E.forward_lines(plan, 2, True, nsp)
    dims = ["NB", "COUT"] + ["OD", "OH", "OW"][3 - nsp :]
    blk = cfg["block"]
    return "\n".join([
        f"x5 = _kiln_view5({names[0]}, True, {nsp})", f"w5 = _kiln_view5({names[1]}, True, {nsp})",
        "NB, CIN, D, H, W = x5.shape", "COUT, _, KD, KH, KW = w5.shape", *out_sizes(q, False),
        f"out = torch.empty(({', '.join(dims)}), device=x5.device, dtype=x5.dtype)",
        "if out.numel() == 0:\n    return out", *ebody,
        f"bd, bh, bw = _kiln_patch({blk}, OD, OH, OW)",
        "tiles_d, tiles_h, tiles_w = triton.cdiv(OD, bd), triton.cdiv(OH, bh), triton.cdiv(OW, bw)",
        "grid = (NB * COUT * tiles_d * tiles_h * tiles_w,)",
        f"_kiln_dwconv[grid](x5, w5, out{eptrs}, D, H, W, COUT, OD, OH, OW, COUT // {G}, tiles_d, tiles_h, tiles_w, "
        f"*x5.stride(), *w5.stride()[0:1], *w5.stride()[2:]{estr}, {spatial_kwargs(q)}, BLOCK=bd * bh * bw, BH=bh, "
        "BW=bw, "
        f"num_warps={cfg['num_warps']})",
        "return out",
    ])  # fmt: skip


def dw_parts(plan: Plan, cfg: dict) -> tuple[str, str, str]:
    return dw_kernel(plan), dw_forward(plan, cfg), E.HELPER
