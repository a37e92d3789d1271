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

from kiln.agents.builtin.emit import ancestors, expr, op_line
from kiln.agents.builtin.plan import Plan


class RowKernel:
    def __init__(self, plan: Plan, layout: str, looped: bool, name: str, evict: str = "") -> None:
        self.p, self.layout, self.looped, self.name = plan, layout, looped, name
        # cache hint for the full-size loads: a one-pass kernel reads each element once, so
        # "evict_first" keeps L2 for the output and the other programs (inductor does the same)
        self.hint = f', eviction_policy="{evict}"' if evict else ""
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
        return f"v{i} = tl.load(p{k} + {self._off()}, mask=mask, other=0.0{self.hint}).to(tl.float32)"

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
        online = self._online_pair(reds)
        if online is not None:  # softmax / log-softmax: max and sum of exp in one pass
            lines += self._online_pass(*online, done)
        else:
            for k in range(1, max(self.level[i] for i in reds) + 1):
                lines += self._pass(k, [i for i in reds if self.level[i] == k], done)
        if self.cls[self.p.g.out] == "full":
            lines.append("for c in range(0, R, BLOCK_R):")
            body = self._chunk("c + ") + self._full_nodes(ancestors(self.p, [self.p.g.out], done))
            lines += ["    " + ln for ln in body + [self._store(expr(self.p, self.p.g.out))]]
        else:
            lines.append(self._store(expr(self.p, self.p.g.out)))
        return lines

    def _online_pair(self, reds: list[int]) -> tuple[int, int] | None:
        """(max node, sum node) when the reductions are exactly m = max(s) then sum(exp(s - m)):
        softmax's two reductions, which one pass computes with a running max (the online
        softmax), so a looped softmax reads its row twice instead of three times."""
        if len(reds) != 2:
            return None
        nodes = self.p.g.nodes
        a, b = sorted(reds, key=lambda i: self.level[i])
        if (nodes[a].op, nodes[b].op, self.level[a], self.level[b]) != ("max", "sum", 1, 2):
            return None
        e = nodes[nodes[b].args[0]]
        if e.kind != "op" or e.op != "exp":
            return None
        d = nodes[e.args[0]]
        ok = d.kind == "op" and d.op == "sub" and d.args == (nodes[a].args[0], a) and self.cls[d.args[0]] == "full"
        return (a, b) if ok else None

    def _online_pass(self, a: int, b: int, done: set[int]) -> list[str]:
        """One pass for m = max(s) and l = sum(exp(s - m)): per lane, a running max and a sum
        rescaled whenever the max grows; lanes combined at the end. Lanes that saw only masked
        (or -inf) elements hold max -inf and contribute 0, never exp(-inf - -inf) = NaN."""
        shape = "[ROWS, BLOCK_R]" if self.layout == "rows" else "[BLOCK_R, BLOCK_N]"
        s = self.p.g.nodes[a].args[0]
        ninf = '-float("inf")'
        lines = [f"accm = tl.full({shape}, {ninf}, tl.float32)", f"accl = tl.full({shape}, 0.0, tl.float32)",
                 "for c in range(0, R, BLOCK_R):"]
        body = self._chunk("c + ") + self._full_nodes(ancestors(self.p, [s], done))
        body += [f"mnew = tl.maximum(accm, tl.where(mask, {expr(self.p, s)}, {ninf}))",
                 f"keep = tl.where(mnew == {ninf}, 0.0, tl.exp(accm - mnew))",
                 f"add = tl.where(mask & (mnew != {ninf}), tl.exp({expr(self.p, s)} - mnew), 0.0)",
                 "accl = accl * keep + add",
                 "accm = mnew"]
        lines += ["    " + ln for ln in body]
        lines += [f"v{a} = tl.max(accm, axis={self.axis}, keep_dims=True)",
                  f"v{b} = tl.sum(tl.where(accm == {ninf}, 0.0, accl * tl.exp(accm - v{a})), axis={self.axis}, "
                  "keep_dims=True)"]
        done.update((a, b))
        for i in self.p.live:  # reduced-level values computable now (log of the sum, its reciprocal)
            if self.cls[i] == "red" and self.p.g.nodes[i].kind == "op" and self.level[i] in (1, 2):
                lines.append(op_line(self.p, i))
                done.add(i)
        return lines

    def _pass(self, k: int, reds: list[int], done: set[int], rng: str = "0, R", epilogue: bool = True,
              sum_acc: str = "tl.float32") -> list[str]:
        shape = "[ROWS, BLOCK_R]" if self.layout == "rows" else "[BLOCK_R, BLOCK_N]"
        fills = {"sum": "0.0", "max": '-float("inf")', "min": 'float("inf")'}
        acc = {"sum": sum_acc, "max": "tl.float32", "min": "tl.float32"}
        lines = [f"acc{i} = tl.full({shape}, {fills[self.p.g.nodes[i].op]}, {acc[self.p.g.nodes[i].op]})" for i in reds]
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


def layout_of(plan: Plan) -> str:
    return "rows" if plan.dims[1] == len(plan.full_shape) - 1 else "cols"


PROD_HELPER = '''

def _kiln_prod(dims):
    out = 1
    for d in dims:
        out *= int(d)
    return out
'''
