"""Argreduce template: argmax / argmin along one dim (or of the flattened tensor), int64 indices
exactly as torch's: the first occurrence of the max (min), and a NaN counts as beyond every number
for both (the first NaN's index wins; torch's CPU and CUDA kernels agree on this).

The input is viewed as (M, N, K): N along the reduced dim, M the dims before it, K the dims after
it (K = 1 when it is the last dim; dim=None is (1, numel, 1)). Each of the M * K lanes is an
independent reduction; a program owns BLOCK_M lanes and walks their N elements in blocks of
BLOCK_N, in index order. Values are compared in ACC: fp32 holds fp16, bf16 and fp32 values
exactly, fp64 the 64-bit (and int32) ones, so no rounding merges or splits ties. Per block, per
lane: does it hold a NaN; its best number (NaNs and masked tails excluded); the smallest index
that holds the NaN (if any) or the best number. The lane's carry (best value; its index; whether
a NaN was seen) holds only earlier indices, so a block replaces it only when strictly better (> for max, < for min) or
when it brings the first NaN; after a NaN nothing replaces it. The carry starts at -inf (+inf)
with index 0: while nothing beat it, every element so far is -inf (+inf), and 0 is the first.
Each element is read once.

The value reduced is a load: an elementwise prologue is its own kernel first (classify refuses
it here and the pipeline cuts it), since the indices of near-equal values would change with any
rounding that differs from torch's. Lane r = (m, k) = (r // K, r % K) reads m*N*K + n*K + k and
writes out[r] (out is (M, K) row-major: the input's shape without, or with a 1 at, the dim).
"""

from __future__ import annotations

from kiln.agents.builtin.emit import contig, input_exprs
from kiln.agents.builtin.ir import KGraph
from kiln.agents.builtin.plan import Plan
from kiln.agents.builtin.problem import Unsupported

FILL = {"max": '-float("inf")', "min": 'float("inf")'}
REDUCE = {"max": "tl.max", "min": "tl.min"}
BETTER = {"max": ">", "min": "<"}
WIDE = "(torch.float64, torch.int64, torch.int32)"  # dtypes fp32 cannot hold exactly (int64: to 2**53)


def argreduce_plan(g: KGraph, live: list[int], loads: list[int]) -> Plan:
    """The argreduce family's plan: the output is one argmax/argmin of a forward input or an
    intermediate (lower_argreduce lets nothing else read the indices)."""
    anchors = [i for i in live if g.nodes[i].kind not in ("load", "const", "op")]
    if len(anchors) != 1 or g.nodes[anchors[0]].kind != "argred" or g.out != anchors[0]:
        names = sorted({g.nodes[i].kind for i in anchors})
        raise Unsupported(f"{' and '.join(names)} in one kernel")
    s = anchors[0]
    x = g.nodes[s].args[0]
    if g.nodes[x].kind != "load":
        raise Unsupported("an elementwise prologue fused into argmax/argmin (its own kernel first)")
    return Plan("argreduce", g, live, [x], {x: "in"}, full_shape=g.nodes[x].shape, special=s)


def _params(plan: Plan) -> tuple[str, int, bool]:
    n = plan.g.nodes[plan.special]
    return n.op, int(n.params[0]), bool(n.params[1])


def argreduce_kernel(plan: Plan) -> str:
    kind = _params(plan)[0]
    fill, better = FILL[kind], BETTER[kind]
    body = [
        "lane = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)",
        "lane_ok = lane < LANES",
        "base = (lane // K).to(tl.int64) * N * K + (lane % K).to(tl.int64)",
        "cols = tl.arange(0, BLOCK_N)",
        f"best = tl.full((BLOCK_M,), {fill}, ACC)  # the carry: the best number so far",
        "arg = tl.zeros((BLOCK_M,), tl.int64)  # its index",
        "nan_seen = tl.zeros((BLOCK_M,), tl.int32)  # 1 once a NaN was seen: its index is final",
        "for start in range(0, N, BLOCK_N):",
    ]
    loop = [
        "j = start + cols  # indices along the reduced dim",
        "ok = lane_ok[:, None] & (j < N)[None, :]",
        "x = tl.load(p0 + base[:, None] + j[None, :].to(tl.int64) * K, mask=ok, other=0.0).to(ACC)  # exact",
        "isnan = ok & (x != x)",
        "has_nan = tl.max(isnan.to(tl.int32), axis=1)",
        f"top = {REDUCE[kind]}(tl.where(ok & (x == x), x, {fill}), axis=1)  # the block's best number",
        "hit = tl.where(has_nan[:, None] > 0, isnan, ok & (x == top[:, None]))",
        "idx = tl.min(tl.where(hit, j[None, :], N), axis=1)  # the first hit: ties go to the smaller index",
        f"upd = (nan_seen == 0) & ((has_nan > 0) | (top {better} best))  # strictly better: earlier ones win",
        "best = tl.where(upd, top, best)",
        "arg = tl.where(upd, idx.to(tl.int64), arg)",
        "nan_seen = tl.maximum(nan_seen, has_nan)",
    ]
    text = "\n".join("    " + ln for ln in body) + "\n" + "\n".join("        " + ln for ln in loop)
    return (
        "\n\n@triton.jit\ndef _kiln_argreduce(out_ptr, p0, LANES, N, K, ACC: tl.constexpr, BLOCK_M: tl.constexpr, "
        "BLOCK_N: tl.constexpr):\n"
        f"{text}\n    tl.store(out_ptr + lane, arg, mask=lane_ok)\n"
    )


def argreduce_forward(plan: Plan, cfg: dict) -> str:
    kind, d, keep = _params(plan)
    (name,) = input_exprs(plan)
    blk = cfg["block"]
    if d < 0:  # dim=None: the flattened tensor, one lane
        dims = ["shape = list(t0.shape)  # dim=None: the index into the flattened tensor",
                "N, M, K = t0.numel(), 1, 1",
                f"out_shape = {'[1] * len(shape)' if keep else '[]'}"]  # fmt: skip
    else:
        dims = [f"shape = list(t0.shape)  # dim {d} is reduced",
                f"N, M, K = shape[{d}], _kiln_prod(shape[:{d}]), _kiln_prod(shape[{d + 1}:])",
                f"out_shape = shape[:{d}] + {'[1] + ' if keep else ''}shape[{d + 1}:]"]  # fmt: skip
    return "\n".join([
        contig([name]),
        *dims,
        "out = torch.empty(out_shape, device=t0.device, dtype=torch.int64)",
        "if out.numel() == 0:\n    return out",
        f'if N == 0:\n    raise IndexError("arg{kind}(): cannot reduce over an empty dim")',
        "LANES = M * K",
        "if K == 1:  # lanes are rows: long tiles along the contiguous reduced dim",
        f"    bn = min({blk}, triton.next_power_of_2(N))",
        f"    bm = min(max(1, {blk} // bn), triton.next_power_of_2(LANES))",
        "else:  # lanes are contiguous: wide tiles across them, a few steps along the dim each",
        f"    bm = min({cfg['lanes']}, triton.next_power_of_2(LANES))",
        f"    bn = min(max(1, {blk} // bm), triton.next_power_of_2(N))",
        "grid = (triton.cdiv(LANES, bm),)",
        f"acc = tl.float64 if t0.dtype in {WIDE} else tl.float32  # holds every value exactly",
        f"_kiln_argreduce[grid](out, t0, LANES, N, K, ACC=acc, BLOCK_M=bm, BLOCK_N=bn, num_warps={cfg['num_warps']})",
        "return out",
    ])  # fmt: skip


def argreduce_parts(plan: Plan, cfg: dict) -> tuple[str, str, str]:
    from kiln.agents.builtin.gen_row import PROD_HELPER

    return argreduce_kernel(plan), argreduce_forward(plan, cfg), PROD_HELPER
