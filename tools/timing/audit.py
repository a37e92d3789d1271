"""Binding a timed lap's outputs: keyed projections the candidate commits, the reference recomputes.

After a lap the parent sends a fresh key; the worker reduces each retained output to `K` numbers,
P_k = sum_i u_k(i) g(x_i), with g(x) = sin(w x / s + phi) - sin(phi) (w, phi from the key, s the
output's RMS on the checked trials) and u_k = a rank-one pattern of random signs (row signs times
column signs of the output viewed as rows of `WIDTH`). Because g is nonlinear and the key is new
after the outputs exist, no shortcut gives P without every element of the output (a linear
projection of a matmul would: (u^T A) B); so a worker that skipped or deferred work in the lap must
do it now, inside the commit the parent times. For a few (lap, slot) pairs picked in secret after
all laps, the reference worker recomputes the output and its projections: E[(P_k - P'_k)^2] is the
sum of (g(x_i) - g(x'_i))^2 over elements, at most (w / s)^2 ||x - x'||^2, so the mean squared
difference estimates the output's L2 error. Everything runs on the output's device in float32
(accumulated in float64) and is read back twice per output. It must stay below 9x a bound made from the
error the candidate itself showed on the checked trials (and, under --atol/--rtol, the tolerance:
`verdict`): a timed output as accurate as the checked ones passes by two orders of magnitude;
garbage, stale or lower-precision output does not. Non-finite elements are counted and must match exactly.
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Iterator
from typing import Any

import torch

from kiln.tools.correctness import leaves as walk
from kiln.tools.inputs import derive_seed

K = 8
WIDTH = 1024
ROWS_PER_CHUNK = 1 << 16  # x WIDTH = 64 Mi elements at a time: float32 temporaries of at most 256 MB
# (a commit projects every output of a lap, each op a Python call: fewer blocks, fewer calls. At 16 Mi
# a 256 MB output took 4 blocks, and the candidate's commit ran 1.5-8 ms a lap over the baseline's on
# the H200, 11 outputs of ~50 calls each in a worker whose calls cost more)
THRESHOLD = 9.0
ERR_MARGIN = 4.0  # the bound allows 4x the relative L2 error the candidate showed on checked trials
FLOOR_FP32_UNITS = 16.0  # ...and never less than 16 fp32 unit roundoffs (or one of the output's dtype)


def sign_table(key: int, leaf: int, width: int, rows: int, tail: int, device: Any = "cpu"
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The K sign patterns of one output: column signs (width, K), row signs (rows, K) and the tail's
    signs (tail, K), as +-1.0 in float32, from one generator draw on `device` (both sides of an audit
    project on the same kind of device, and a generator gives the same draws there for the same seed;
    one draw, where a generator per pattern cost ~40 small launches an output)."""
    gen = torch.Generator(device=device).manual_seed(derive_seed(key, leaf, "signs") & ((1 << 63) - 1))
    n = width + rows + tail
    s = torch.randint(0, 2, (K, n), generator=gen, dtype=torch.int8, device=device).to(torch.float32).mul_(2).sub_(1)
    return (s[:, :width].t().contiguous(), s[:, width:width + rows].t().contiguous(),
            s[:, width + rows:].t().contiguous())


def _wave(key: int, leaf: int) -> tuple[float, float]:
    rng = random.Random(derive_seed(key, "wave", leaf))
    return 0.5 + rng.random(), 2 * math.pi * rng.random()


def _g(x: torch.Tensor, scale: float, phi: float) -> torch.Tensor:
    """g on a slice, in float32, non-finite elements contributing 0 (the exact path)."""
    xf = x.float()
    return torch.where(torch.isfinite(xf), torch.sin(xf * scale + phi) - math.sin(phi), 0.0)


def _sines(x: torch.Tensor, scale: float, phi: float) -> torch.Tensor:
    """sin(scale x + phi) in float32, in two passes over the slice (the fast path: one fused
    multiply-add, one sine, in place)."""
    if x.dtype == torch.float32:
        y = torch.add(torch.tensor(phi, dtype=torch.float32), x, alpha=scale)
    else:
        y = x.float().mul_(scale).add_(phi)
    return y.sin_()


def _project_tensor(t: torch.Tensor, key: int, leaf: int, sigma: float) -> dict[str, Any]:
    """K projections and the non-finite counts of one tensor, on its device, read back twice.

    Each block of rows takes the fast path first: Y = sin(scale X + phi) (two passes), Y @ cols, and
    the -sin(phi) of g added in closed form (sum over the block of u_k = its row signs' sum times the
    column signs' sum). A non-finite element makes its row of Y @ cols NaN in every column, so a block
    whose K sums are all finite held none, and its counts are 0; any other block is redone on the
    exact path (g with the mask, and the counts). An output with no NaN/inf costs about 3 reads and 2
    writes of itself, where the exact path cost ~14 (4.5 ms for a 256 MB output on the H200, 11 of
    them after every timing lap)."""
    flat = t.detach().reshape(-1)
    n = flat.numel()
    w, phi = _wave(key, leaf)
    scale = w / sigma if sigma > 0 and math.isfinite(sigma) else w
    width = min(WIDTH, max(n, 1))
    rows = n // width
    dev = flat.device
    tail = flat[rows * width:]
    cols, row_signs, tail_signs = sign_table(key, leaf, width, rows, tail.numel(), dev)
    col_sums = cols.sum(0, dtype=torch.float64)
    acc = torch.zeros(K + 3, dtype=torch.float64, device=dev)
    spans = [(r0, min(rows, r0 + ROWS_PER_CHUNK)) for r0 in range(0, rows, ROWS_PER_CHUNK)]
    parts = []
    with _no_tf32():
        for r0, r1 in spans:
            block = _sines(flat[r0 * width:r1 * width].view(r1 - r0, width), scale, phi) @ cols  # (rows, K)
            rs = row_signs[r0:r1]
            parts.append((block * rs).sum(0, dtype=torch.float64)
                         - math.sin(phi) * rs.sum(0, dtype=torch.float64) * col_sums)
        finite = torch.isfinite(torch.stack(parts)).all(1).tolist() if parts else []  # one read-back
        for part, ok in zip(parts, finite, strict=True):
            if ok:
                acc[:K] += part
        for (r0, r1), ok in zip(spans, finite, strict=True):
            if ok:
                continue
            block = _g(flat[r0 * width:r1 * width].view(r1 - r0, width), scale, phi) @ cols
            acc[:K] += (block * row_signs[r0:r1]).sum(0, dtype=torch.float64)
            _count_nonfinite(acc, flat[r0 * width:r1 * width])
    if tail.numel():
        acc[:K] += (_g(tail, scale, phi).unsqueeze(1) * tail_signs).sum(0, dtype=torch.float64)
        _count_nonfinite(acc, tail)
    vals = acc.tolist()
    return {"kind": "tensor", "p": vals[:K], "n": n, "dtype": str(t.dtype).removeprefix("torch."),
            "shape": list(t.shape), "nan": int(vals[K]), "posinf": int(vals[K + 1]), "neginf": int(vals[K + 2])}


def _count_nonfinite(acc: torch.Tensor, flat: torch.Tensor) -> None:
    """Add a slice's NaN, +inf and -inf counts to acc[K], acc[K+1], acc[K+2]."""
    if not flat.is_floating_point():
        return
    for s in range(0, flat.numel(), 1 << 24):
        c = flat[s:s + (1 << 24)]
        acc[K] += torch.isnan(c).sum()
        acc[K + 1] += (c == math.inf).sum()
        acc[K + 2] += (c == -math.inf).sum()


@contextlib.contextmanager
def _no_tf32() -> Iterator[None]:
    """The projections' matmul in full fp32, whatever the process set (eager_tf32 times with TF32)."""
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def project(output: Any, key: int, sigma: list[float]) -> list[dict[str, Any]]:
    """The committed projections of one forward() result (one dict per leaf)."""
    return [_project_leaf(obj, key, i, sigma) for i, (_, obj) in enumerate(walk(output))]


BATCH_MAX = 1 << 22  # outputs up to this many elements (16 MB of float32) are projected a lap's slots at a time
BATCH_ELEMS = 1 << 25  # ... in stacks of at most this many elements (128 MB of float32 a temporary)


def project_many(outputs: list[Any], key: int, sigma: list[float]) -> list[list[dict[str, Any]]]:
    """`project` of each of a lap's outputs, the same numbers: a leaf that has one shape and dtype in
    every slot (small outputs, where a commit cost ~20 Python calls and two read-backs an output, so
    hundreds of slots took ~100 ms a lap) is projected for the slots at once, a stack of them at a
    time, with one read-back a stack (the sign patterns depend on the key and the leaf, never the
    slot). A slot whose stack row is not finite is projected alone, on the exact path."""
    per = [list(walk(o)) for o in outputs]
    out: list[list[dict[str, Any] | None]] = [[None] * len(leaves) for leaves in per]
    stacks: dict[tuple[Any, ...], list[int]] = {}
    for j, leaves in enumerate(per):
        for i, (_, obj) in enumerate(leaves):
            if isinstance(obj, torch.Tensor) and type(obj) is torch.Tensor and obj.is_floating_point() \
                    and 0 < obj.numel() <= BATCH_MAX:
                stacks.setdefault((i, tuple(obj.shape), obj.dtype, obj.device), []).append(j)
    for (i, _, _, _), js in stacks.items():
        sig = sigma[i] if i < len(sigma) else 1.0
        step = max(1, BATCH_ELEMS // per[js[0]][i][1].numel())
        for c in range(0, len(js), step):
            chunk = js[c:c + step]
            for j, proj in zip(chunk, _project_stack([per[j][i][1] for j in chunk], key, i, sig), strict=True):
                out[j][i] = proj
    for j, leaves in enumerate(per):
        for i, (_, obj) in enumerate(leaves):
            if out[j][i] is None:
                out[j][i] = _project_leaf(obj, key, i, sigma)
    return out  # type: ignore[return-value]


def _project_stack(ts: list[torch.Tensor], key: int, leaf: int, sigma: float) -> list[dict[str, Any]]:
    """`_project_tensor` of B same-shape tensors at once: their (B, n) stack through the fast path
    (the tail through g, its counts exact), one read-back; a row that is not finite is redone alone."""
    x = torch.stack([t.detach().reshape(-1) for t in ts])
    b, n = x.shape
    w, phi = _wave(key, leaf)
    scale = w / sigma if sigma > 0 and math.isfinite(sigma) else w
    width = min(WIDTH, max(n, 1))
    rows = n // width
    tail = x[:, rows * width:]
    cols, row_signs, tail_signs = sign_table(key, leaf, width, rows, tail.shape[1], x.device)
    acc = torch.zeros(b, K + 4, dtype=torch.float64, device=x.device)  # K sums, 3 counts, finite
    with _no_tf32():
        if rows:
            y = _sines(x[:, :rows * width].reshape(b, rows, width), scale, phi) @ cols  # (B, rows, K)
            acc[:, :K] = (y * row_signs).sum(1, dtype=torch.float64) \
                - math.sin(phi) * row_signs.sum(0, dtype=torch.float64) * cols.sum(0, dtype=torch.float64)
        acc[:, K + 3] = torch.isfinite(acc[:, :K]).all(1).to(torch.float64)
        if tail.shape[1]:
            acc[:, :K] += (_g(tail, scale, phi).unsqueeze(2) * tail_signs).sum(1, dtype=torch.float64)
            acc[:, K] += torch.isnan(tail).sum(1)
            acc[:, K + 1] += (tail == math.inf).sum(1)
            acc[:, K + 2] += (tail == -math.inf).sum(1)
    dtype, shape = str(ts[0].dtype).removeprefix("torch."), list(ts[0].shape)
    out = []
    for t, vals in zip(ts, acc.tolist(), strict=True):
        if vals[K + 3] != 1.0:  # a NaN/inf in the rows: the exact path counts it
            out.append(_project_tensor(t, key, leaf, sigma))
            continue
        out.append({"kind": "tensor", "p": vals[:K], "n": n, "dtype": dtype, "shape": shape,
                    "nan": int(vals[K]), "posinf": int(vals[K + 1]), "neginf": int(vals[K + 2])})
    return out


def _project_leaf(obj: Any, key: int, i: int, sigma: list[float]) -> dict[str, Any]:
    if isinstance(obj, torch.Tensor) and type(obj) is torch.Tensor and obj.is_floating_point():
        return _project_tensor(obj, key, i, sigma[i] if i < len(sigma) else 1.0)
    if isinstance(obj, torch.Tensor):
        return {"kind": "exact", "digest": _digest(obj), "shape": list(obj.shape)}
    if isinstance(obj, (bool, int, float)) or obj is None:
        return {"kind": "number", "value": obj}
    return {"kind": "other", "cls": type(obj).__name__}


def _digest(t: torch.Tensor) -> int:  # integer outputs are compared exactly
    from kiln.tools import chunked

    return chunked.digest(t.detach())


def bound_sq(ref: torch.Tensor, key: int, leaf: int, sigma: float, *, atol: float, rho: float) -> float:
    """(w / s)^2 sum_i (atol + rho |ref_i|)^2 over the reference's finite elements."""
    w, _ = _wave(key, leaf)
    scale = w / sigma if sigma > 0 and math.isfinite(sigma) else w
    total = 0.0
    flat = ref.detach().reshape(-1)
    for s in range(0, flat.numel(), 1 << 24):
        x = flat[s:s + (1 << 24)].double()
        x = x[torch.isfinite(x)]
        total += float((x.abs() * rho + atol).pow(2).sum())
    return scale * scale * total


def verdict(cand: list[dict[str, Any]], ref_out: Any, key: int, sigma: list[float], *, rel_err: float,
            atol: float, rtol: float, tight: bool = False) -> tuple[bool, str, float | None]:
    """Does a committed projection match the reference's recomputed output? (passed, why, worst stat)

    The allowed error per element is atol + rho |ref_i|. Under the fixed rule (--atol/--rtol) rho is
    the larger of rtol and 4x the relative L2 error the candidate showed on the checked trials: the
    L2 form of the rule the trials applied. `tight` (the numerics rule judged every checked trial,
    kiln's default) holds timed outputs to the candidate's own demonstrated accuracy instead: rho is
    4x that error, at least 16 fp32 roundoffs (one of a narrower output dtype), and atol is rho times
    the output's RMS. The default atol/rtol are far looser than the numerics rule, so a kernel exact
    whenever checked and in fp16 while timed passed the audit (rtol 1e-4 of fp32 is fp16's rounding);
    an honest kernel's timed outputs err as its checked ones do, by a 12x margin in L2 here."""
    ref = project(ref_out, key, sigma)
    if not isinstance(cand, list) or len(cand) != len(ref):
        return False, f"the committed projection has {len(cand) if isinstance(cand, list) else 0} outputs, " \
                      f"the reference {len(ref)}", None
    tight = tight and math.isfinite(rel_err)
    rho = ERR_MARGIN * max(rel_err, 0.0) if tight else max(rtol, ERR_MARGIN * max(rel_err, 0.0))
    worst: float | None = None
    refs = [obj for _, obj in walk(ref_out)]
    for i, (c, r) in enumerate(zip(cand, ref, strict=True)):
        leaf_rho, leaf_atol = rho, atol
        if tight and isinstance(refs[i], torch.Tensor):
            unit = torch.finfo(refs[i].dtype).eps / 2 if refs[i].is_floating_point() else 0.0
            floor = max(FLOOR_FP32_UNITS * 2.0**-24, unit)
            leaf_rho = max(rho, floor)
            s_i = sigma[i] if i < len(sigma) else 0.0
            leaf_atol = leaf_rho * s_i if s_i > 0 and math.isfinite(s_i) else atol
        ok, why, stat = _leaf_verdict(c, r, refs[i], key, i, sigma, atol=leaf_atol, rho=leaf_rho, rtol=rtol)
        if stat is not None:
            worst = stat if worst is None else max(worst, stat)
        if not ok:
            return False, f"output {i}: {why}", worst
    return True, "", worst


def _leaf_verdict(c: Any, r: dict[str, Any], ref_obj: Any, key: int, i: int, sigma: list[float], *, atol: float,
                  rho: float, rtol: float) -> tuple[bool, str, float | None]:
    if not isinstance(c, dict) or c.get("kind") != r["kind"]:
        return False, "not the reference's kind of output", None
    if r["kind"] != "tensor":
        if r["kind"] == "number" and isinstance(r["value"], float) and isinstance(c.get("value"), (int, float)):
            return abs(float(c["value"]) - r["value"]) <= atol + rtol * abs(r["value"]), "a different number", None
        return c == r, "differs", None
    if c.get("shape") != r["shape"] or c.get("dtype") != r["dtype"]:
        return False, "not the reference's shape or dtype", None
    if any(c.get(k) != r[k] for k in ("nan", "posinf", "neginf")):
        return False, "its NaN/inf elements differ from the reference's", None
    p = c.get("p")
    if not isinstance(p, list) or len(p) != K or not all(isinstance(x, (int, float)) for x in p):
        return False, "no valid projection", None
    diff = sum((float(a) - b) ** 2 for a, b in zip(p, r["p"], strict=True)) / K
    bound = bound_sq(ref_obj, key, i, sigma[i] if i < len(sigma) else 1.0, atol=atol, rho=rho)
    slack = (1e-9 * sum(abs(b) for b in r["p"]) / K) ** 2 + 1e-18
    stat = diff / (THRESHOLD * bound + slack)
    if not math.isfinite(diff) or stat > 1.0:
        return False, (f"its values differ from the reference's by {math.sqrt(diff / max(bound, 1e-300)):.3g}x the "
                       "allowed error (estimated from keyed projections)"), stat
    return True, "", stat
