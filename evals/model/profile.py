"""Where a model's forward spends its time, grouped by op signature and ranked by share.

On a GPU: `torch.profiler`, one `record_function` range per recorded call, so each kernel's time is
charged to the call (and module path) that launched it. On a CPU there is nothing worth timing (the
kernels will run on a GPU): calls are ranked by a cost model (bytes at 4 TB/s against FLOPs at the
dtype's peak, plus a launch), and the profile says so. Two forwards on different inputs must make
the same calls; signatures that differ are dynamic (shapes or data-dependent control flow) and skipped.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch

from kiln.evals.model.capture import Call, Recorder, record, recording
from kiln.evals.model.records import CallSig, OpGroup, ProfileRecord
from kiln.evals.model.sigs import HEAD_MARK

BW_BYTES_PER_US = 4.0e6  # 4 TB/s, an H200's copy bandwidth (kiln measured 4.2)
PEAK_FLOPS_PER_US = {"float32": 6.0e7, "tf32": 4.0e8, "bfloat16": 7.0e8, "float16": 7.0e8}
"""Dense peaks of an H200 as measured (bench/RESULTS.md: fp32 50, tf32 400, bf16 760 TFLOP/s), rounded."""
MATMULS = ("F.linear", "torch.matmul", ".matmul", "op:__matmul__", "torch.bmm", ".bmm", "torch.mm", ".mm")
LAUNCH_US = 3.0
RANDOM_OPS = {"F.dropout", "torch.dropout", "F.dropout2d", "torch.rand_like", "torch.randn_like", ".bernoulli_"}
HEADS = re.compile(r"^(F\.(group_norm|layer_norm|rms_norm|batch_norm|linear|silu|gelu|softmax)|torch\.(softmax|add|mul)"
                   r"|\.(softmax|add|mul)|op:__(r?mul|r?add)__)$")
"""Calls a fused pair can start with (a module site cannot: its call is a wrapped forward, which the
patch runtime cannot hold back as a placeholder). Residual adds and gates (`mul`) head pairs such
as `add -> relu` (a ResNet block's end) and `mul -> add` (rotary embeddings)."""
TAILS = re.compile(r"^(F\.(silu|gelu|relu|mish|sigmoid)|torch\.(sigmoid|tanh|mul|add)|\.(sigmoid|tanh|to|mul|add)"
                   r"|op:__(r?mul|r?add)__)$")


def _nbytes(shape: list[int], dtype: str) -> int:
    n = 1
    for d in shape:
        n *= d
    return n * torch.empty((), dtype=getattr(torch, dtype)).element_size()


def flops_of(call: Call) -> int:
    """FLOPs of the compute-bound ops (matmuls, convolutions, attention); 0 for the rest."""
    ts = [a.tensor for a in call.sig.args if a.tensor is not None]
    out = call.sig.out
    if out is None or not ts:
        return 0
    n_out = 1
    for d in out.shape:
        n_out *= d
    op = call.sig.op
    if op in MATMULS and len(ts) >= 2:
        return 2 * n_out * ts[0].shape[-1]
    if op.startswith("F.conv") and len(ts) >= 2:
        w = ts[1].shape
        k = 1
        for d in w[1:]:
            k *= d
        return 2 * n_out * k
    if op == "F.scaled_dot_product_attention" and len(ts) >= 3:
        q, kk = ts[0].shape, ts[1].shape
        return 4 * n_out * kk[-2] if len(q) >= 2 else 0
    return 0


def bytes_of(call: Call) -> int:
    if call.free or call.sig.out is None:
        return 0
    ts = [a.tensor for a in call.sig.args if a.tensor is not None]
    return sum(_nbytes(t.shape, t.dtype) for t in ts) + _nbytes(call.sig.out.shape, call.sig.out.dtype)


def roofline_us(nbytes: int, flops: int, dtype: str) -> float:
    """The fastest a call can be: its bytes at copy bandwidth or its FLOPs at the dtype's peak."""
    peak = PEAK_FLOPS_PER_US.get(dtype, PEAK_FLOPS_PER_US["float32"])
    return max(nbytes / BW_BYTES_PER_US, flops / peak)


def cost_us(call: Call) -> float:
    if call.free:
        return 0.0
    return roofline_us(bytes_of(call), flops_of(call), _dtype(call)) + LAUNCH_US


def gpu_times(model: torch.nn.Module, run: Callable[[], Any], params: dict[int, str], reps: int = 3
              ) -> tuple[Recorder, dict[int, float], float]:
    """(recorder of one forward, kernel us per call index, kernel us of the whole forward), per
    forward (gputime.py says what is counted)."""
    from kiln.evals.model.gputime import profile_forward

    box: list[Recorder] = []

    def forward() -> None:
        box.append(Recorder(params, ranges=True))
        with torch.no_grad(), recording(model, box[-1]):
            run()

    a = profile_forward(forward, reps)
    return box[-1], a.per_call_us, a.total_us


def _gpu_profile(model: torch.nn.Module, run: Callable[[], Any], params: dict[int, str]) -> tuple | str:
    """gpu_times(...), or the one-line error that makes the profile fall back to the cost model."""
    try:
        rec, times, total = gpu_times(model, run, params)
    except Exception as err:  # noqa: BLE001 - a profiler that fails still leaves a ranked profile
        return f"{type(err).__name__}: {' '.join(str(err).split())}"[:200]
    return (rec, times, total) if total > 0 else "no kernel time recorded"


def _skip_reason(call: Call) -> str | None:
    if call.unwritable:
        return f"cannot extract: {call.unwritable}"
    if call.inplace:
        return "cannot extract: an in-place op (it writes its input)"
    if call.sig.op in RANDOM_OPS or (call.sig.op == "F.dropout" and "training=True" in call.key):
        return "cannot extract: a random op"
    if call.sig.op in ("F.batch_norm", "F.instance_norm") and any(a.src == "True" for a in call.sig.args[5:6]):
        return "cannot extract: batch statistics in training mode (it updates the running statistics)"
    if call.sig.out is not None and not call.sig.out.dtype.startswith(("float", "bfloat")):
        return f"cannot extract: a {call.sig.out.dtype} output (kernels are written for floating outputs)"
    return None


def group_id(op: str, key: str) -> str:
    base = re.sub(r"[^A-Za-z0-9]+", "_", op.split(":")[-1].split(".")[-1]).strip("_") or "op"
    return f"{base}_{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def _common_scope(a: str, b: str) -> str:
    pa, pb = a.split(".") if a else [], b.split(".") if b else []
    common = []
    for x, y in zip(pa, pb, strict=False):
        if x != y:
            break
        common.append(x)
    return ".".join(common)


def _fusable(head: Call, tail: Call) -> bool:
    if head.uses != 1 or head.view or head.inplace or tail.free:
        return False
    if tail.inplace and (not tail.in_ids or tail.in_ids[0] != head.out_id or "out" in tail.key):
        return False  # an in-place tail must write the head's output (relu_(bn(x)), F.relu(.., inplace=True))
    if head.unwritable or tail.unwritable or not HEADS.match(head.sig.op) or not TAILS.match(tail.sig.op):
        return False
    if head.out_id not in tail.in_ids:
        return False
    if tail.sig.op == ".to":  # only a dtype cast after a softmax computed in fp32
        return head.sig.op.endswith("softmax") and all(a.kind != "value" or a.src.startswith("torch.")
                                                      for a in tail.sig.args)
    others = [a for a in tail.sig.args if a.tensor is not None]
    return all(a.tensor.shape == head.sig.out.shape for a in others)


def _tail_sig(head: Call, tail: Call) -> CallSig:
    sig = tail.sig.model_copy(deep=True)
    slot = tail.in_ids.index(head.out_id)
    tensors = [a for a in sig.args if a.tensor is not None]
    tensors[slot].param = HEAD_MARK
    return sig


def groups_of(calls: list[Call], times: dict[int, float] | None) -> list[OpGroup]:
    """Group calls by signature (and adjacent fusable pairs), with their time and cost."""
    groups: dict[str, OpGroup] = {}
    real = [c for c in calls if not c.free]
    for c in real:
        t = times.get(c.index, 0.0) if times is not None else cost_us(c)
        g = groups.get(c.key) or groups.setdefault(c.key, OpGroup(id=group_id(c.sig.op, c.key), sig=c.sig,
                                                                  kind="module" if c.module_class else "function",
                                                                  module_class=c.module_class,
                                                                  skipped=_skip_reason(c)))
        _add(g, c.path, c.path, t, bytes_of(c), flops_of(c), _dtype(c))
    for head, tail in zip(real, real[1:], strict=False):
        if not _fusable(head, tail):
            continue
        tsig = _tail_sig(head, tail)
        key = f"{head.key} -> {tsig.key()}"
        t = (times.get(head.index, 0.0) + times.get(tail.index, 0.0)) if times is not None \
            else cost_us(head) + cost_us(tail)
        g = groups.get(key) or groups.setdefault(key, OpGroup(id="fused_" + group_id(head.sig.op, key), sig=head.sig,
                                                              tail=tsig, kind="fused", module_class=head.module_class))
        inter = 2 * _nbytes(head.sig.out.shape, head.sig.out.dtype)
        _add(g, head.path, _common_scope(head.path, tail.path), t, bytes_of(head) + bytes_of(tail) - inter,
             flops_of(head), _dtype(tail))
    return list(groups.values())


def _dtype(call: Call) -> str:
    """The precision a call's FLOPs run at: its output dtype, or tf32 for an fp32 convolution or matmul
    that PyTorch lets run on TF32 tensor cores (cuDNN convolutions do by default)."""
    dt = call.sig.out.dtype if call.sig.out else "float32"
    if dt != "float32":
        return dt
    if call.sig.op.startswith("F.conv") and torch.backends.cudnn.allow_tf32:
        return "tf32"
    return "tf32" if call.sig.op in MATMULS and torch.backends.cuda.matmul.allow_tf32 else dt


def _add(g: OpGroup, path: str, scope: str, t: float, nbytes: int, flops: int, dtype: str) -> None:
    g.count += 1
    g.time_us += t
    g.bytes_moved += nbytes
    g.flops += flops
    g.roofline_us += roofline_us(nbytes, flops, dtype)
    if path not in g.module_paths:
        g.module_paths.append(path)
    if scope not in g.scopes:
        g.scopes.append(scope)


def _dynamic(a: list[Call], b: list[Call]) -> set[str]:
    ca = Counter(c.key for c in a if not c.free)
    cb = Counter(c.key for c in b if not c.free)
    return {k for k in set(ca) | set(cb) if ca[k] != cb[k]}


def profile_model(model: torch.nn.Module, runs: list[Callable[[], Any]], device: str, dtype: str) -> ProfileRecord:
    """Profile one forward (`runs[0]`); `runs[1]` (other inputs, same shapes) finds dynamic signatures."""
    params = _params(model)
    first, _ = record(model, runs[0])
    second, _ = record(model, runs[1]) if len(runs) > 1 else (first, None)
    dynamic = _dynamic(first.calls, second.calls)
    profiled = _gpu_profile(model, runs[0], params) if device == "cuda" else None
    if isinstance(profiled, tuple):
        rec, times, total = profiled
        groups, method, note = groups_of(rec.calls, times), "torch.profiler", "CUDA time per op (torch.profiler)"
        share_of = (f"the forward's GPU kernel time ({total:.1f} us: the sum of its kernels' durations, "
                    "torch.profiler; not wall time)")
    else:
        rec, total = first, sum(cost_us(c) for c in first.calls)
        groups, method = groups_of(first.calls, None), "cost-model"
        note = ("no GPU: calls ranked by a cost model (bytes at 4 TB/s vs FLOPs at the dtype's peak, plus a "
                "3 us launch), not measured") if profiled is None else \
               f"torch.profiler failed ({profiled}): calls ranked by the cost model instead, not measured"
        share_of = f"the cost model's total for one forward ({total:.1f} us, not measured)"
    for g in groups:
        if g.sig.key() in dynamic or (g.tail is not None and g.tail.key() in dynamic):
            g.skipped = ("dynamic: its calls differ between two forwards on inputs of the same shape "
                         "(dynamic shapes or data-dependent control flow)")
        g.share = g.time_us / total if total > 0 else 0.0
    groups.sort(key=lambda g: -g.time_us)
    attributed = sum(g.time_us for g in groups if g.kind != "fused")
    return ProfileRecord(method=method, note=note, share_of=share_of, device=device, dtype=dtype, total_us=total,
                         attributed_us=attributed, n_calls=len(rec.calls), groups=groups,
                         dynamic=sorted(dynamic))


def _params(model: torch.nn.Module) -> dict[int, str]:
    from kiln.evals.model.capture import param_names

    return param_names(model)


def select(profile: ProfileRecord, top: int, min_share: float) -> list[OpGroup]:
    """The hot groups to optimise: the top K single ops by share with at least min_share (skipped ones
    excluded), and the fused pairs offered on top of them (their head or tail is one of those)."""
    singles = [g for g in profile.groups if g.kind != "fused" and g.skipped is None and g.share >= min_share][:top]
    keys = {g.sig.key() for g in singles}
    fused = [g for g in profile.groups if g.kind == "fused" and g.skipped is None and g.share >= min_share
             and (g.sig.key() in keys or (g.tail is not None and g.tail.key() in keys))]
    return singles + fused


def describe(g: OpGroup) -> str:
    """`12.3% of the time, gain 8.1%` (a fused pair's share is its two ops' time, already counted in them)."""
    pair = f", = {g.sig.op} + {g.tail.op}" if g.tail is not None else ""
    return f"{100 * g.share:.1f}% of the time{pair}, expected gain {100 * g.gain():.1f}%"


def selection_line(chosen: list[OpGroup], top: int, min_share: float) -> str:
    """What --top and --min-share chose, in one line (a user asking for 3 sees why there are 5)."""
    singles = [g for g in chosen if g.kind != "fused"]
    fused = len(chosen) - len(singles)
    pairs = f" plus {fused} fused pair(s) on them (each pair's head or tail is one of those)" if fused else ""
    return (f"optimising {len(singles)} op group(s) (--top {top}: the hottest with at least {100 * min_share:g}% "
            f"of the time){pairs}: {len(chosen)} problem(s)")
