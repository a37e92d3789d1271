"""Cross-entropy template (KernelBench level 1's 95): `F.cross_entropy(x, t)` with x (N, C) floating
and t (N,) integer class indices, exactly as torch: loss_i = logsumexp_j x_ij - x_i,t_i; rows whose
target is ignore_index give 0 and are not counted; 'mean' is the sum over counted rows over their
count (0 / 0 = NaN when every row is ignored, as torch), 'sum' the sum, 'none' the (N,) losses.

Two kernels. `_kiln_crossent_rows`: a program owns BLOCK_M rows and walks their C logits in chunks
of BLOCK_C, keeping an online logsumexp in fp32 per row: the running max m and the running sum s
of exp(x - m); a chunk with a larger max rescales s by exp(m_old - m_new), so no exp sees a positive
argument and logits of any magnitude (x1000) cannot overflow. Each logit is read once. The shift is
0 while the max is infinite (a row of -inf so far, or a +inf logit), so no -inf - -inf (NaN) appears:
a row of -inf gives lse -inf, one with +inf gives +inf, as torch's. The target is loaded as an
integer (never through fp32) and x[row, t] gathered with one masked load; a target outside [0, C)
is masked out of that load (never read out of bounds) and makes the row's loss NaN where torch
raises. It writes the row's loss (fp32, or for 'none' straight into the output in x's dtype) and
whether it counts. `_kiln_crossent_reduce`: one program adds the losses and the counts in row order,
BLOCK lanes at a time (a fixed order: deterministic), and writes the 0-D result in x's dtype.
x is read through its strides, so a non-contiguous input is not copied.
"""

from __future__ import annotations

from kiln.agents.builtin.emit import input_exprs
from kiln.agents.builtin.ir import KGraph
from kiln.agents.builtin.plan import Plan
from kiln.agents.builtin.problem import Unsupported

ROWS = '''

@triton.jit
def _kiln_crossent_rows(x_ptr, t_ptr, loss_ptr, valid_ptr, N, C, sxn, sxc, stn, IGNORE,
                        WRITE_VALID: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < N
    base = rows.to(tl.int64) * sxn  # 64-bit offsets: N * C may pass 2**31
    cols = tl.arange(0, BLOCK_C)
    m = tl.full((BLOCK_M,), -float("inf"), tl.float32)  # running max of the row's logits
    s = tl.zeros((BLOCK_M,), tl.float32)  # running sum of exp(x - shift(m))
    for start in range(0, C, BLOCK_C):
        j = start + cols
        ok = row_ok[:, None] & (j < C)[None, :]
        x = tl.load(x_ptr + base[:, None] + j[None, :].to(tl.int64) * sxc, mask=ok, other=-float("inf"))
        x = x.to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=1))
        shift = tl.where(tl.abs(m_new) == float("inf"), 0.0, m_new)  # no -inf - -inf, no inf - inf
        # exp(m - shift) <= 1 while m_new is finite (0 for the first chunk: m = -inf); when it is +inf
        # the sum is +inf whatever s held
        s = s * tl.exp(m - shift) + tl.sum(tl.exp(x - shift[:, None]), axis=1)
        m = m_new
    shift = tl.where(tl.abs(m) == float("inf"), 0.0, m)  # lse = shift + log(s)
    t = tl.load(t_ptr + rows.to(tl.int64) * stn, mask=row_ok, other=0).to(tl.int64)  # an integer load
    counted = row_ok & (t != IGNORE)
    in_range = (t >= 0) & (t < C)
    safe_t = tl.where(in_range, t, 0)  # the address stays inside the row even when masked
    xt = tl.load(x_ptr + base + safe_t * sxc, mask=counted & in_range, other=0.0).to(tl.float32)
    # (shift - x_t) + log(s), as torch's -log_softmax: exactly log(s) when x_t is the max, whatever its size
    loss = tl.where(in_range, (shift - xt) + tl.log(s), float("nan"))  # torch raises on an out-of-range target
    loss = tl.where(counted, loss, 0.0)
    tl.store(loss_ptr + rows, loss.to(loss_ptr.dtype.element_ty), mask=row_ok)
    if WRITE_VALID:
        tl.store(valid_ptr + rows, counted.to(tl.int32), mask=row_ok)
'''

REDUCE = '''

@triton.jit
def _kiln_crossent_reduce(loss_ptr, valid_ptr, out_ptr, N, MEAN: tl.constexpr, BLOCK: tl.constexpr):
    # one program: lane k adds rows k, k + BLOCK, ... in order, then one fixed tree over the lanes
    lanes = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    cnt = tl.zeros((BLOCK,), tl.int32)
    for start in range(0, N, BLOCK):
        r = start + lanes
        ok = r < N
        acc += tl.load(loss_ptr + r, mask=ok, other=0.0)
        cnt += tl.load(valid_ptr + r, mask=ok, other=0)
    total = tl.sum(acc, axis=0)
    if MEAN:
        total = total / tl.sum(cnt, axis=0).to(tl.float32)  # 0 / 0 = NaN when every row is ignored
    tl.store(out_ptr, total.to(out_ptr.dtype.element_ty))
'''


def crossent_plan(g: KGraph, live: list[int], loads: list[int]) -> Plan:
    """The crossent family's plan: the output is one xent node of a logits load and a target load
    (lower_crossent lets nothing else read either the target or the loss)."""
    anchors = [i for i in live if g.nodes[i].kind not in ("load", "const", "op")]
    if len(anchors) != 1 or g.nodes[anchors[0]].kind != "xent" or g.out != anchors[0]:
        names = sorted({g.nodes[i].kind for i in anchors})
        raise Unsupported(f"{' and '.join(names)} in one kernel")
    s = anchors[0]
    x, t = g.nodes[s].args
    if g.nodes[x].kind != "load":
        raise Unsupported("an elementwise prologue fused into cross_entropy (its own kernel first)")
    return Plan("crossent", g, live, [x, t], {x: "logits", t: "target"}, full_shape=g.nodes[x].shape, special=s)


def crossent_kernel(plan: Plan) -> str:
    return ROWS + REDUCE


def crossent_forward(plan: Plan, cfg: dict) -> str:
    node = plan.g.nodes[plan.special]
    red, ignore = node.op, int(node.params[0])
    x, t = input_exprs(plan)
    if red == "none":  # the rows kernel writes the losses into the output itself
        out = ["out = torch.empty((N,), device=x.device, dtype=x.dtype)", "loss, valid = out, out"]
    else:
        out = ["out = torch.empty((), device=x.device, dtype=x.dtype)",
               "loss = torch.empty((N,), device=x.device, dtype=torch.float32)  # per-row losses",
               "valid = torch.empty((N,), device=x.device, dtype=torch.int32)  # 1: the row counts"]  # fmt: skip
    lines = [
        f"x, t = {x}, {t}",
        "N, C = x.shape",
        *out,
        "if N > 0:",
        f"    bc = min({cfg['chunk']}, triton.next_power_of_2(C))",
        f"    bm = min(max(1, {cfg['block']} // bc), triton.next_power_of_2(N))",
        "    grid = (triton.cdiv(N, bm),)",
        f"    _kiln_crossent_rows[grid](x, t, loss, valid, N, C, x.stride(0), x.stride(1), t.stride(0), {ignore},"
        f" WRITE_VALID={red != 'none'}, BLOCK_M=bm, BLOCK_C=bc, num_warps={cfg['num_warps']})",
    ]
    if red != "none":
        lines.append(f"_kiln_crossent_reduce[(1,)](loss, valid, out, N, MEAN={red == 'mean'}, "
                     f"BLOCK={cfg['reduce_block']}, num_warps=4)")  # fmt: skip
    return "\n".join([*lines, "return out"])


def crossent_parts(plan: Plan, cfg: dict) -> tuple[str, str, str]:
    return crossent_kernel(plan), crossent_forward(plan, cfg), ""
