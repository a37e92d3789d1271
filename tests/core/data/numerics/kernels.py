"""Honest Triton reductions over the last dimension of a contiguous 2-D fp32 tensor, written
independently of PyTorch's: another summation order (BLOCK lanes, each summing sequentially over
n / BLOCK elements, then a tree over the lanes), fp32 accumulation. The numerics tolerance must
accept them under x1000, x0.001 and cancelling inputs (tests/core/test_tolerance.py)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _row_sum(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    # one program per row; lane j of `acc` sums elements j, j + BLOCK, j + 2 BLOCK, ...
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, n, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * n + cols, mask=cols < n, other=0.0)
    tl.store(y_ptr + row, tl.sum(acc, axis=0) * scale)


@triton.jit
def _layer_norm(x_ptr, w_ptr, b_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    # two passes for the statistics (mean, then the mean of squared deviations), a third to write
    row = tl.program_id(0)
    base = x_ptr + row * n
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, n, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(base + cols, mask=cols < n, other=0.0)
    mean = tl.sum(acc, axis=0) / n
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, n, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        d = tl.where(cols < n, tl.load(base + cols, mask=cols < n, other=0.0) - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n + eps)
    for off in range(0, n, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        m = cols < n
        x = tl.load(base + cols, mask=m, other=0.0)
        w = tl.load(w_ptr + cols, mask=m, other=0.0)
        b = tl.load(b_ptr + cols, mask=m, other=0.0)
        tl.store(y_ptr + row * n + cols, (x - mean) * rstd * w + b, mask=m)


@triton.jit
def _softmax(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    # online softmax: per lane a running max and a running sum rescaled when the max grows
    row = tl.program_id(0)
    base = x_ptr + row * n
    m_lane = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
    s_lane = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, n, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < n, other=float("-inf"))
        m_new = tl.maximum(m_lane, x)
        alive = m_new > float("-inf")
        s_lane = tl.where(alive, s_lane * tl.exp(m_lane - m_new) + tl.exp(x - m_new), 0.0)
        m_lane = m_new
    m = tl.max(m_lane, axis=0)
    s = tl.sum(tl.where(m_lane > float("-inf"), s_lane * tl.exp(m_lane - m), 0.0), axis=0)
    for off in range(0, n, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < n, other=float("-inf"))
        tl.store(y_ptr + row * n + cols, tl.exp(x - m) / s, mask=cols < n)


def _block(x: torch.Tensor) -> int:
    """Wide blocks under the interpreter (few Python-level steps), register-sized ones on a GPU."""
    return min(16384 if x.device.type == "cpu" else 2048, triton.next_power_of_2(x.shape[1]))


def row_sum(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
    _row_sum[(x.shape[0],)](x, y, x.shape[1], 1.0, BLOCK=_block(x))
    return y


def row_mean(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
    _row_sum[(x.shape[0],)](x, y, x.shape[1], 1.0 / x.shape[1], BLOCK=_block(x))
    return y


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    y = torch.empty_like(x)
    _layer_norm[(x.shape[0],)](x, w, b, y, x.shape[1], eps, BLOCK=_block(x))
    return y


def softmax(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    _softmax[(x.shape[0],)](x, y, x.shape[1], BLOCK=_block(x))
    return y
