"""Scan template: a cumulative sum or product along one dim (inclusive, exclusive, reverse, or of
a narrowed prefix; lower_scan.py), with an elementwise prologue (`cumsum(x * mask)`) and epilogue
fused.

The scanned tensor is viewed as (M, N, K): N along the scanned dim, M the dims before it, K the
dims after it (K = 1 when it is the last dim). Each of the M * K lanes is an independent scan; a
program owns BLOCK_M lanes and walks their N elements in blocks of BLOCK_N, in scan order (from
the end for a reverse scan, so no flip is ever materialized). Per block: load the tile (masked
tails read the identity: 0 for sums, 1 for products), scan it along axis 1 in fp32
(tl.cumsum / tl.cumprod), combine with the lane's carried prefix, store, and carry the block's
last column forward. Every output is one combine of the carry with an in-block prefix, so the
error grows with the number of blocks (N / BLOCK_N), not with N: no worse than a sequential fp32
scan. Sums accumulate in fp32. Products accumulate in fp64: a prefix product leaves fp32's range
(a row of x3 inputs grows ~e^0.1 per element) and may come back, and partial products of a block
can overflow where the prefix does not (inf * 0 = nan); PyTorch's CPU cumprod and the float64
reference accumulate in double, so an fp32 product would differ from them at the range's edge.
Each element is read once and written once.

Lane r is (m, k) = (r // K, r % K); its element n sits at m*N*K + n*K + k in the input and at
m*OUT*K + n*K + k in the output (OUT = N - trim along the scanned dim). With K = 1 the tile is
contiguous along its columns (a row of the scan); with K > 1 along its rows (neighbouring lanes).
"""

from __future__ import annotations

from kiln.agents.builtin.emit import ancestors, contig, expr, input_exprs, op_line
from kiln.agents.builtin.ir import KGraph
from kiln.agents.builtin.plan import Plan
from kiln.agents.builtin.problem import Unsupported

SCAN_FN = {"sum": "tl.cumsum", "prod": "tl.cumprod"}
COMBINE = {"sum": "carry[:, None] + {s}", "prod": "carry[:, None] * {s}"}
IDENTITY = {"sum": "0.0", "prod": "1.0"}
ACC = {"sum": "tl.float32", "prod": "tl.float64"}
POSITIONAL = ("triu", "tril")  # ops that read a matmul tile's (row, column) indices: not here


def scan_plan(g: KGraph, live: list[int], loads: list[int]) -> Plan:
    """The scan family's plan: one scan, elementwise ops of same-shape inputs before and after it."""
    anchors = [i for i in live if g.nodes[i].kind not in ("load", "const", "op")]
    if len(anchors) != 1 or g.nodes[anchors[0]].kind != "scan":
        names = sorted({g.nodes[i].kind for i in anchors})
        raise Unsupported(f"{' and '.join(names)} in one kernel")
    if any(g.nodes[i].kind == "op" and g.nodes[i].op in POSITIONAL for i in live):
        raise Unsupported("triu/tril outside a matmul's epilogue")
    s = anchors[0]
    x = g.nodes[s].args[0]
    in_shape, out_shape = g.nodes[x].shape, g.nodes[s].shape
    pre = set(_closure(g, [x]))
    post = set(_closure(g, [g.out], stop=s))
    if s not in post:
        raise Unsupported("an output that does not depend on the scan")
    roles = {}
    for i in loads:
        want = [shp for shp, part in ((in_shape, pre), (out_shape, post)) if i in part]
        if any(g.nodes[i].shape != shp for shp in want):
            shp = list(g.nodes[i].shape)
            raise Unsupported(f"an input of shape {shp} broadcast against a scan of {list(in_shape)}")
        roles[i] = "in" if i in pre else "out"
    return Plan("scan", g, live, loads, roles, full_shape=in_shape, special=s)


def _closure(g: KGraph, roots: list[int], stop: int = -1) -> list[int]:
    seen, todo = set(), list(roots)
    while todo:
        i = todo.pop()
        if i not in seen:
            seen.add(i)
            todo.extend(g.nodes[i].args if i != stop else ())
    return sorted(seen)


def _params(plan: Plan) -> tuple[str, int, bool, bool, int]:
    n = plan.g.nodes[plan.special]
    d, rev, excl, trim = (int(p) for p in n.params)
    return n.op, d, bool(rev), bool(excl), trim


def _values(plan: Plan, nodes: list[int], offs: str, mask: str) -> list[str]:
    """Kernel lines computing `nodes` (loads at `offs`, ops); consts are inlined by expr()."""
    lines = []
    for i in nodes:
        n = plan.g.nodes[i]
        if n.kind == "load":
            k = plan.loads.index(i)
            lines.append(f"v{i} = tl.load(p{k} + {offs}, mask={mask}, other=0.0).to(tl.float32)")
        elif n.kind == "op":
            lines.append(op_line(plan, i))
    return lines


def scan_kernel(plan: Plan) -> str:
    kind, _, rev, excl, _ = _params(plan)
    s, x = plan.special, plan.g.nodes[plan.special].args[0]
    ptrs = "".join(f", p{k}" for k in range(len(plan.loads)))
    pre = ancestors(plan, [x], set())
    post = [i for i in ancestors(plan, [plan.g.out], {s}) if i != s]
    body = [
        "lane = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)",
        "lane_ok = lane < LANES",
        "m = (lane // K).to(tl.int64)",
        "k = (lane % K).to(tl.int64)",
        "in_base = m * N * K + k",
        "out_base = m * OUT * K + k",
        "cols = tl.arange(0, BLOCK_N)",
        f"carry = tl.full((BLOCK_M,), {IDENTITY[kind]}, {ACC[kind]})",
        "for start in range(0, OUT, BLOCK_N):",
        "    j = start + cols  # position in scan order",
        f"    pos = {'(OUT - 1) - j' if rev else 'j'}  # position along the dim in the output",
        f"    src = {'pos - 1' if excl else 'pos'}  # the input element fed to the scan at this position",
        "    ok = lane_ok[:, None] & (j < OUT)[None, :]",
        f"    ok_in = {'ok & (src >= 0)[None, :]' if excl else 'ok'}",
        "    in_off = in_base[:, None] + src[None, :].to(tl.int64) * K",
        "    out_off = out_base[:, None] + pos[None, :].to(tl.int64) * K",
    ]
    loop = _values(plan, pre, "in_off", "ok_in")
    loop += [
        f"vals = tl.where(ok_in, {expr(plan, x)}, {IDENTITY[kind]}).to({ACC[kind]})  # tails, head: identity",
        f"acc = {COMBINE[kind].format(s=f'{SCAN_FN[kind]}(vals, axis=1)')}",
        "carry = tl.sum(tl.where(cols[None, :] == BLOCK_N - 1, acc, 0.0), axis=1)  # the last column, exactly",
        f"v{s} = acc",
    ]
    loop += _values(plan, post, "out_off", "ok")
    result = expr(plan, plan.g.out)
    loop.append(f"tl.store(out_ptr + out_off, {result}.to(out_ptr.dtype.element_ty), mask=ok)")
    text = "\n".join("    " + ln for ln in body) + "\n" + "\n".join("        " + ln for ln in loop)
    return (
        f"\n\n@triton.jit\ndef _kiln_scan(out_ptr{ptrs}, LANES, N, OUT, K, BLOCK_M: tl.constexpr, "
        f"BLOCK_N: tl.constexpr):\n{text}\n"
    )


def scan_forward(plan: Plan, cfg: dict) -> str:
    _, d, _, _, trim = _params(plan)
    names = input_exprs(plan)
    ts = [f"t{k}" for k in range(len(names))]
    src = next(f"t{k}" for k, i in enumerate(plan.loads) if plan.roles[i] == "in")  # has x's shape
    blk = cfg["block"]
    return "\n".join([
        contig(names),
        f"shape = list({src}.shape)  # the scanned tensor's; dim {d} is scanned",
        f"N, M, K = shape[{d}], _kiln_prod(shape[:{d}]), _kiln_prod(shape[{d + 1}:])",
        f"OUT = N - {trim}" if trim else "OUT = N",
        f"dtype = {_dtype(ts, src)}",
        f"out = torch.empty(shape[:{d}] + [OUT] + shape[{d + 1}:], device={src}.device, dtype=dtype)",
        "if out.numel() == 0:\n    return out",
        "LANES = M * K",
        "if K == 1:  # lanes are rows: long tiles along the contiguous scanned dim",
        f"    bn = min({blk}, triton.next_power_of_2(OUT))",
        f"    bm = min(max(1, {blk} // bn), triton.next_power_of_2(LANES))",
        "else:  # lanes are contiguous: wide tiles across them, a few steps of the scan each",
        f"    bm = min({cfg['lanes']}, triton.next_power_of_2(LANES))",
        f"    bn = min(max(1, {blk} // bm), triton.next_power_of_2(OUT))",
        "grid = (triton.cdiv(LANES, bm),)",
        f"_kiln_scan[grid](out{''.join(', ' + t for t in ts)}, LANES, N, OUT, K, BLOCK_M=bm, BLOCK_N=bn, "
        f"num_warps={cfg['num_warps']})",
        "return out",
    ])  # fmt: skip


def _dtype(ts: list[str], src: str) -> str:
    """The output dtype: the first floating input's (a bool mask times x is x's dtype)."""
    if len(ts) == 1:
        return f"{src}.dtype"
    return f"next((t.dtype for t in ({', '.join(ts)}) if t.is_floating_point()), {src}.dtype)"


def scan_parts(plan: Plan, cfg: dict) -> tuple[str, str, str]:
    from kiln.agents.builtin.gen_row import PROD_HELPER

    return scan_kernel(plan), scan_forward(plan, cfg), PROD_HELPER
