"""fp32 GEMMs on the GPU by `tl.dot` input precision (issue 25 item 9): speed, and error against kiln's
fp32 tolerance rule, for the figures the Coder's prompt (agents/prompts/speed.j2) quotes from a CPU
emulation (tests/agents/test_fast_paths.py).

    python bench/fast_paths.py [--sizes 1024x8192x8192,4096x4096x4096] [--check 256x4096x4096]

Prints one row per precision: median time (triton.testing.do_bench, median of cold-L2 calls),
TFLOP/s, and the worst error over kiln's allowance on the `--check` size (over 1 fails).
"""

from __future__ import annotations

import argparse
import math

import torch
import triton
import triton.language as tl

PRECISIONS = ("ieee", "tf32x3", "bf16x3", "bf16x6", "tf32")


@triton.jit
def gemm(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
         GROUP_M: tl.constexpr, PREC: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m, tiles_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    group = pid // (GROUP_M * tiles_n)
    first = group * GROUP_M
    rows = tl.minimum(tiles_m - first, GROUP_M)
    pm = first + (pid % (GROUP_M * tiles_n)) % rows
    pn = (pid % (GROUP_M * tiles_n)) // rows
    rm, rn, rk = pm * BLOCK_M + tl.arange(0, BLOCK_M), pn * BLOCK_N + tl.arange(0, BLOCK_N), tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PREC)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def run(a: torch.Tensor, b: torch.Tensor, prec: str) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=torch.float32)
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128),)
    gemm[grid](a, b, c, M, N, K, BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=8, PREC=prec, num_warps=8, num_stages=3)
    return c


class Linear(torch.nn.Module):
    def __init__(self, w: torch.Tensor) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(w.clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight


def over_allowance(x: torch.Tensor, w: torch.Tensor, got: torch.Tensor) -> float:
    from kiln.tools import numerics
    from kiln.tools.correctness import pack, tolerances
    from kiln.tools.tolerance import judge

    model = Linear(w)
    num = numerics.build(model, "fp32")
    with torch.no_grad():
        packed = pack(model(x.clone()), 1)
    packed["numerics"] = numerics.numerics_pack(num, (x,), packed, seed=1)
    atol, rtol = tolerances("fp32", None, None)
    j = judge(packed, pack(got, 1), dtype="fp32", atol=atol, rtol=rtol, numerics=True)
    return max(o.max_err_over_tol or 0.0 for o in j.outputs)


def shape(text: str) -> tuple[int, int, int]:
    m, n, k = (int(v) for v in text.split("x"))
    return m, n, k


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1024x8192x8192,4096x4096x4096")
    ap.add_argument("--check", default="256x4096x4096")
    args = ap.parse_args()
    m, n, k = shape(args.check)
    g = torch.Generator().manual_seed(0)
    xc, wc = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g) / math.sqrt(k)
    errs = {p: over_allowance(xc, wc, run(xc.cuda(), wc.cuda(), p).cpu()) for p in PRECISIONS}
    print(f"| precision | error / allowance ({args.check}) | " + " | ".join(f"{s} us (TFLOP/s)" for s in args.sizes.split(",")) + " |")
    print("|---|---|" + "---|" * len(args.sizes.split(",")))
    for p in PRECISIONS:
        cells = []
        for s in args.sizes.split(","):
            M, N, K = shape(s)
            a, b = torch.randn(M, K, device="cuda"), torch.randn(K, N, device="cuda")
            us = 1e3 * triton.testing.do_bench(lambda a=a, b=b, p=p: run(a, b, p), return_mode="median")
            cells.append(f"{us:.0f} ({2 * M * N * K / us / 1e6:.0f})")
        print(f"| {p} | {errs[p]:.3g}{' FAIL' if errs[p] > 1 else ''} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
