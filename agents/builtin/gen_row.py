"""Row-reduction template: softmax, log-softmax, layer/RMS norm and sum/mean/max/min over any
adjacent dims, with elementwise ops before and after, fused into one kernel.

The input is viewed as (M, R, N): R is the reduced extent, M the dims before it, N the dims
after. Layout "rows" (N == 1): a program owns ROWS contiguous rows, tile [ROWS, BLOCK_R], reduce
along axis 1, loads vectorize along the row. Layout "cols" (N > 1): a program owns one m and
BLOCK_N contiguous columns, tile [BLOCK_R, BLOCK_N], reduce along axis 0, loads vectorize along
N. When the reduced extent fits one tile the kernel is one pass (one read, one write); otherwise
a looped kernel makes one pass per reduction level plus one for the output.
"""

from __future__ import annotations

from kiln.agents.builtin.classify import Plan
from kiln.agents.builtin.emit import ancestors, contig, expr, input_exprs, op_line


class RowKernel:
    def __init__(self, plan: Plan, layout: str, looped: bool, name: str) -> None:
        self.p, self.layout, self.looped, self.name = plan, layout, looped, name
        self.cls = self._classes()
        self.level = self._levels()

    def _classes(self) -> dict[int, str]:
        cls: dict[int, str] = {}
        for i in self.p.live:
            n = self.p.g.nodes[i]
            if n.kind == "load":
                cls[i] = "full"
            elif n.kind in ("const", "rsize"):
                cls[i] = "scalar"
            elif n.kind == "reduce":
                cls[i] = "red"
            else:
                lv = {cls[a] for a in n.args}
                cls[i] = "full" if "full" in lv else ("red" if "red" in lv else "scalar")
        return cls

    def _levels(self) -> dict[int, int]:
        lv: dict[int, int] = {}
        for i in self.p.live:
            n = self.p.g.nodes[i]
            base = max((lv[a] for a in n.args), default=0)
            lv[i] = base + 1 if n.kind == "reduce" else base
        return lv

    # ------------------------------------------------------------------ pieces

    @property
    def axis(self) -> int:
        return 1 if self.layout == "rows" else 0

    def _setup(self) -> list[str]:
        if self.layout == "rows":
            return [
                "rows = t * ROWS + tl.arange(0, ROWS)[:, None]",
                "row_ok = rows < M",
                "base = rows.to(tl.int64) * R",
            ]
        return [
            "nblk = tl.cdiv(N, BLOCK_N)",
            "m = t // nblk",
            "ncol = (t % nblk) * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]",
            "n_ok = ncol < N",
            "base = tl.cast(m, tl.int64) * R * N + ncol",
        ]

    def _chunk(self, start: str) -> list[str]:
        if self.layout == "rows":
            return [f"cols = {start}tl.arange(0, BLOCK_R)[None, :]", "mask = row_ok & (cols < R)"]
        return [f"rr = {start}tl.arange(0, BLOCK_R)[:, None]", "mask = (rr < R) & n_ok"]

    def _off(self) -> str:
        return "base + cols" if self.layout == "rows" else "base + rr.to(tl.int64) * N"

    def _load(self, i: int) -> str:
        k = self.p.loads.index(i)
        if self.p.roles[i] == "vec":  # a weight along the reduced dims (rows layout only)
            return f"v{i} = tl.load(p{k} + cols, mask=cols < R, other=0.0).to(tl.float32)"
        return f"v{i} = tl.load(p{k} + {self._off()}, mask=mask, other=0.0).to(tl.float32)"

    def _full_nodes(self, nodes: list[int]) -> list[str]:
        out = []
        for i in nodes:
            kind = self.p.g.nodes[i].kind
            if self.cls[i] != "full":
                continue
            out.append(self._load(i) if kind == "load" else op_line(self.p, i))
        return out

    def _reduce_expr(self, i: int, src: str) -> str:
        op = self.p.g.nodes[i].op
        fill = {"sum": "0.0", "max": '-float("inf")', "min": 'float("inf")'}[op]
        fn = {"sum": "tl.sum", "max": "tl.max", "min": "tl.min"}[op]
        return f"{fn}(tl.where(mask, {src}, {fill}), axis={self.axis}, keep_dims=True)"

    def _store(self, v: str) -> str:
        cast = f"{v}.to(out_ptr.dtype.element_ty)"
        if self.cls[self.p.g.out] == "full":
            return f"tl.store(out_ptr + {self._off()}, {cast}, mask=mask)"
        if self.layout == "rows":
            return f"tl.store(out_ptr + rows, {cast}, mask=row_ok)"
        return f"tl.store(out_ptr + tl.cast(m, tl.int64) * N + ncol, {cast}, mask=n_ok)"

    # ------------------------------------------------------------------ bodies

    def _onepass(self) -> list[str]:
        lines = self._setup() + self._chunk("")
        for i in self.p.live:
            n = self.p.g.nodes[i]
            if n.kind == "reduce":
                lines.append(f"v{i} = {self._reduce_expr(i, expr(self.p, n.args[0]))}")
            elif self.cls[i] != "scalar":
                lines += self._full_nodes([i]) if self.cls[i] == "full" else [op_line(self.p, i)]
        return lines + [self._store(expr(self.p, self.p.g.out))]

    def _looped(self) -> list[str]:
        lines = self._setup()
        reds = [i for i in self.p.live if self.p.g.nodes[i].kind == "reduce"]
        done: set[int] = set()
        for k in range(1, max(self.level[i] for i in reds) + 1):
            lines += self._pass(k, [i for i in reds if self.level[i] == k], done)
        if self.cls[self.p.g.out] == "full":
            lines.append("for c in range(0, R, BLOCK_R):")
            body = self._chunk("c + ") + self._full_nodes(ancestors(self.p, [self.p.g.out], done))
            lines += ["    " + ln for ln in body + [self._store(expr(self.p, self.p.g.out))]]
        else:
            lines.append(self._store(expr(self.p, self.p.g.out)))
        return lines

    def _pass(self, k: int, reds: list[int], done: set[int], rng: str = "0, R", epilogue: bool = True) -> list[str]:
        shape = "[ROWS, BLOCK_R]" if self.layout == "rows" else "[BLOCK_R, BLOCK_N]"
        fills = {"sum": "0.0", "max": '-float("inf")', "min": 'float("inf")'}
        lines = [f"acc{i} = tl.full({shape}, {fills[self.p.g.nodes[i].op]}, tl.float32)" for i in reds]
        lines.append(f"for c in range({rng}, BLOCK_R):")
        body = self._chunk("c + ")
        body += self._full_nodes(ancestors(self.p, [self.p.g.nodes[i].args[0] for i in reds], done))
        comb = {"sum": "acc{i} + tl.where(mask, {s}, 0.0)", "max": 'tl.maximum(acc{i}, tl.where(mask, {s}, -float("inf")))',
                "min": 'tl.minimum(acc{i}, tl.where(mask, {s}, float("inf")))'}  # fmt: skip
        for i in reds:
            src = expr(self.p, self.p.g.nodes[i].args[0])
            body.append(f"acc{i} = " + comb[self.p.g.nodes[i].op].format(i=i, s=src))
        lines += ["    " + ln for ln in body]
        fn = {"sum": "tl.sum", "max": "tl.max", "min": "tl.min"}
        lines += [f"v{i} = {fn[self.p.g.nodes[i].op]}(acc{i}, axis={self.axis}, keep_dims=True)" for i in reds]
        done.update(reds)
        if not epilogue:
            return lines
        for i in self.p.live:  # reduced-level values computable after this pass
            if self.cls[i] == "red" and self.p.g.nodes[i].kind == "op" and self.level[i] == k:
                lines.append(op_line(self.p, i))
                done.add(i)
        return lines

    def source(self) -> str:
        ptrs = ", ".join(f"p{k}" for k in range(len(self.p.loads)))
        tile = "ROWS: tl.constexpr" if self.layout == "rows" else "BLOCK_N: tl.constexpr"
        body = self._looped() if self.looped else self._onepass()
        inner = "\n".join("        " + ln for ln in body)
        return (
            f"\n\n@triton.jit\ndef {self.name}(out_ptr, {ptrs}, M, R, N, ntiles, BLOCK_R: tl.constexpr, {tile}):\n"
            "    pid = tl.program_id(0)\n"
            "    for t in range(pid, ntiles, tl.num_programs(0)):\n"
            f"{inner}\n"
        )


def row_kernels(plan: Plan) -> str:
    from kiln.agents.builtin.gen_split import split_kernels, splittable

    layout = "rows" if plan.dims[1] == len(plan.full_shape) - 1 else "cols"
    one = RowKernel(plan, layout, False, "_kiln_row_onepass").source()
    out = one + RowKernel(plan, layout, True, "_kiln_row_looped").source()
    return out + (split_kernels(plan, layout) if splittable(plan, layout) else "")


def row_forward(plan: Plan, cfg: dict) -> str:
    d0, d1 = plan.dims
    layout = "rows" if d1 == len(plan.full_shape) - 1 else "cols"
    main = input_exprs(plan)[[plan.roles[i] for i in plan.loads].index("full")]
    nd = len(plan.full_shape)
    if RowKernel(plan, layout, False, "").cls[plan.g.out] == "full":
        oshape = "shape"
    elif len(plan.g.out_shape) == nd:  # keepdim
        oshape = f"shape[:{d0}] + (1,) * {d1 - d0 + 1} + shape[{d1 + 1}:]"
    else:
        oshape = f"shape[:{d0}] + shape[{d1 + 1}:]"
    lines = [
        contig(input_exprs(plan)),
        f"shape = tuple({main}.shape)",
        f"M, R, N = _kiln_prod(shape[:{d0}]), _kiln_prod(shape[{d0}:{d1 + 1}]), _kiln_prod(shape[{d1 + 1}:])",
        f"out = torch.empty({oshape}, device={main}.device, dtype={main}.dtype)",
        "if out.numel() == 0 or R == 0:\n    return out",
    ]
    from kiln.agents.builtin.gen_split import split_forward, splittable

    if splittable(plan, layout):
        lines += split_forward(layout, cfg, len(plan.loads))
    lines += _launch_rows(cfg) if layout == "rows" else _launch_cols(cfg)
    args = ", ".join(f"t{k}" for k in range(len(plan.loads)))
    lines.append(f"grid = (min(ntiles, _kiln_sm_count(out.device) * {cfg['waves']}) if {bool(cfg['persistent'])} else ntiles,)")
    tile = "ROWS=rows" if layout == "rows" else "BLOCK_N=bn"
    lines.append(
        f"kernel[grid](out, {args}, M, R, N, ntiles, BLOCK_R=br, {tile}, num_warps=nw, num_stages={cfg['num_stages']})"
    )
    return "\n".join(lines + ["return out"])


def _launch_rows(cfg: dict) -> list[str]:
    return [
        f"if R <= {cfg['onepass_max']}:",
        "    kernel, br = _kiln_row_onepass, triton.next_power_of_2(R)",
        f"    rows = max(1, min({cfg['tile']} // br, triton.next_power_of_2(M), 64))",
        "else:",
        f"    kernel, br, rows = _kiln_row_looped, {cfg['chunk']}, 1",
        f"nw = max(1, min({cfg['num_warps']}, rows * br // 256))",
        "ntiles = triton.cdiv(M, rows)",
    ]


def _launch_cols(cfg: dict) -> list[str]:
    return [
        f"bn = min({cfg['block_n']}, triton.next_power_of_2(N))",
        f"if triton.next_power_of_2(R) * bn <= {cfg['tile']}:",
        "    kernel, br = _kiln_row_onepass, triton.next_power_of_2(R)",
        "else:",
        f"    kernel, br = _kiln_row_looped, max(1, {cfg['tile']} // bn)",
        f"nw = max(1, min({cfg['num_warps']}, br * bn // 256))",
        "ntiles = M * triton.cdiv(N, bn)",
    ]


PROD_HELPER = '''

def _kiln_prod(dims):
    out = 1
    for d in dims:
        out *= int(d)
    return out
'''
