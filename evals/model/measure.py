"""The end-to-end figures on a GPU, within the run's clock: each group in the model, the kept set
against eager (never slower), the patched groups' kernel time, the host's issue time, torch.compile
of the patched model against torch.compile of the original, and peak memory.

torch.compile of the original is timed once, early (the `baseline` stage), and its compile time sets
how much of the budget the end needs; compile of the patched model is timed here when it fits."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from kiln.evals.model.budget import Clock
from kiln.evals.model.bundle import Bundle
from kiln.evals.model.inmodel import Samples, alone, forward, group_gpu_us, kept_alone, never_slower
from kiln.evals.model.records import E2ERecord, LatencyRecord
from kiln.evals.model.targets import Target
from kiln.tools.timing.stats import speedup, summarize

PAIRS = {"patched_vs_eager": ("eager", "patched"), "patched_vs_compile": ("compile", "patched"),
         "compile_vs_eager": ("eager", "compile"), "compile_patched_vs_compile": ("compile", "compile_patched")}


def peak_bytes(fn: Callable[[], Any]) -> int:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return int(torch.cuda.max_memory_allocated())


def time_us(fn: Callable[[], Any], max_s: float = 3.0, n_min: int = 30, n_max: int = 300) -> list[float]:
    """Per-call CUDA-event times of fn() (after warm-up), until the CI is tight or time runs out."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out: list[float] = []
    start = time.monotonic()
    while len(out) < n_max and (len(out) < n_min or time.monotonic() - start < max_s):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e3)
        if len(out) >= n_min and summarize(out).half_width_pct < 1.0:
            break
    return out


def compiled(t: Target) -> Callable[[], Any]:
    torch._dynamo.reset()
    comp = torch.compile(t.model)

    def fn() -> Any:
        with torch.no_grad():
            return comp(*t.args, **t.kwargs)
    return fn


def compile_samples(t: Target, max_s: float = 3.0) -> tuple[list[float], float, str]:
    """(per-forward us of torch.compile of the model as it is now, compile seconds, error)."""
    t0 = time.monotonic()
    try:
        fn = compiled(t)
        fn()
        torch.cuda.synchronize()
        compile_s = time.monotonic() - t0
        return time_us(fn, max_s), compile_s, ""
    except Exception as err:  # noqa: BLE001 - a model torch.compile cannot compile: eager figures only
        return [], time.monotonic() - t0, f"torch.compile failed: {type(err).__name__}: {err}"[:300]
    finally:
        torch._dynamo.reset()


def _cap(clock: Clock, want_s: float, share: float = 0.15) -> float:
    """A measurement's time: what it wants, at most `share` of what the clock leaves."""
    return max(0.3, min(want_s, share * clock.left_s())) if clock.bounded else want_s


def baseline_figures(t: Target, say: Callable[[str], None]) -> dict:
    """Eager and torch.compile of the original (samples, compile seconds, error), said in one line."""
    out: dict = {"eager": time_us(forward(t), 2.0)}
    out["compile"], out["compile_s"], err = compile_samples(t, 2.0)
    if err:
        out["compile_error"] = err
    say(f"  baseline: eager {_ms(out['eager'])} ms, torch.compile {_ms(out['compile'])} ms "
        f"(compiled in {out['compile_s']:.0f} s)")
    return out


def _ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) / 1e3:.3f}" if samples else "-"


def baseline_only(baseline: dict) -> E2ERecord:
    """Nothing to patch: the figures of the original model, from the baseline stage."""
    rec = E2ERecord(measured=bool(baseline.get("eager")), passed=True,
                    note="nothing to patch: eager and torch.compile of the original, from the baseline stage")
    gpu = {k: baseline[k] for k in ("eager", "compile") if baseline.get(k)}
    rec.compile_s = baseline.get("compile_s")
    _latency(rec, gpu, baseline.get("compile_error", ""), nothing=True)
    rec.compile_policy = "original"
    return rec


def measure_gpu(t: Target, bundle: Bundle, keep: list[str], rec: E2ERecord, *, faster_alone: set[str],
                clock: Clock, baseline: dict) -> list[str]:
    """Fill `rec`; returns the groups that stay patched. A measurement that fails is a note in the
    record; if the in-model one fails, nothing stays patched."""
    samples: Samples | None = None
    if keep:
        try:
            keep, samples = _in_model(t, bundle, keep, rec, faster_alone, clock)
        except Exception as err:  # noqa: BLE001 - nothing is patched on figures kiln could not take
            rec.dropped += [f"{g}: unpatched: the in-model measurement failed ({_line(err)})" for g in keep]
            keep, samples = [], None
    gpu = dict(samples.gpu_us) if samples else {"eager": time_us(forward(t), _cap(clock, 2.0))}
    if samples:
        rec.host_us = {k: statistics.median(v) for k, v in samples.host_us.items()}
        if clock.fits(10.0):
            _noted(rec, "kernel time per patched group", lambda: rec.group_gpu_us.update(
                group_gpu_us(t, bundle, keep)))
    _noted(rec, "torch.compile", lambda: _compile(t, bundle, keep, rec, gpu, clock, baseline))
    _latency(rec, gpu, baseline.get("compile_error", ""), nothing=not keep)
    _noted(rec, "peak memory", lambda: _peaks(t, bundle, keep, rec))
    cp = rec.speedups.get("compile_patched_vs_compile")
    rec.compile_policy = "kernels" if cp is not None and cp.verdict == "faster" else "original"
    _drift(rec, gpu, baseline)
    return keep


def _in_model(t: Target, bundle: Bundle, keep: list[str], rec: E2ERecord, faster_alone: set[str], clock: Clock
              ) -> tuple[list[str], Samples | None]:
    rec.in_model, _ = alone(t, bundle, keep, _cap(clock, 1.0 + 0.5 * len(keep)))
    keep, lost = kept_alone(keep, rec.in_model, faster_alone)
    rec.dropped += lost
    in_gain = {g: rec.in_model[g].value - 1.0 for g in keep}
    keep, samples, slow = never_slower(t, bundle, keep, in_gain, _cap(clock, 2.0))
    rec.dropped += slow
    return keep, samples


def _peaks(t: Target, bundle: Bundle, keep: list[str], rec: E2ERecord) -> None:
    rec.peak_bytes["eager"] = peak_bytes(forward(t))
    if keep:
        with bundle.applied(t.model, only=set(keep)):
            rec.peak_bytes["patched"] = peak_bytes(forward(t))


def _line(err: BaseException) -> str:
    return f"{type(err).__name__}: {' '.join(str(err).split())}"[:300]


def _noted(rec: E2ERecord, what: str, fn: Callable[[], object]) -> None:
    try:
        fn()
    except Exception as err:  # noqa: BLE001 - an optional figure: its failure is said, the run goes on
        rec.budget_notes.append(f"{what} not measured: {_line(err)}")


def _compile(t: Target, bundle: Bundle, keep: list[str], rec: E2ERecord, gpu: dict[str, list[float]],
             clock: Clock, baseline: dict) -> None:
    if baseline.get("compile"):
        gpu["compile"] = baseline["compile"]
    rec.compile_s = baseline.get("compile_s")
    need = 1.3 * (rec.compile_s or 30.0) + 5.0
    if "compile" not in gpu and not baseline.get("compile_error"):
        if not clock.fits(need):
            rec.budget_notes.append("torch.compile of the original not measured: the time budget ran out")
            return
        gpu["compile"], rec.compile_s, err = compile_samples(t, _cap(clock, 3.0))
        if err:
            baseline["compile_error"] = err
            return
    if not keep or "compile" not in gpu:
        return
    if not clock.fits(need):
        rec.budget_notes.append(f"torch.compile of the patched model not measured: it needs about {need:.0f} s, "
                                f"{max(clock.left_s(), 0):.0f} s were left (compile policy: original)")
        return
    with bundle.applied(t.model, only=set(keep)) as h:
        h.table.compile_kernels = True
        got, _, err = compile_samples(t, _cap(clock, 3.0))
    if got:
        gpu["compile_patched"] = got
    else:
        rec.budget_notes.append(f"torch.compile of the patched model: {err}")


def _latency(rec: E2ERecord, gpu: dict[str, list[float]], error: str, nothing: bool = False) -> None:
    for v in ("eager", "patched", "compile", "compile_patched"):
        if gpu.get(v):
            rec.latency.append(LatencyRecord(variant=v, stat=summarize(gpu[v])))
        elif nothing and v in ("patched", "compile_patched"):
            rec.latency.append(LatencyRecord(variant=v, error="nothing stays patched: it is the original model"))
        else:
            rec.latency.append(LatencyRecord(variant=v, error=error if v.startswith("compile") and error
                                             else "not measured"))
    for name, (base, cand) in PAIRS.items():
        if gpu.get(base) and gpu.get(cand):
            rec.speedups[name] = speedup(gpu[base], gpu[cand], name=base)


def _drift(rec: E2ERecord, gpu: dict[str, list[float]], baseline: dict) -> None:
    """torch.compile of the original was timed minutes earlier: say so when eager moved since."""
    early = baseline.get("eager")
    if not early or not gpu.get("eager"):
        return
    moved = statistics.median(gpu["eager"]) / statistics.median(early) - 1.0
    if abs(moved) > 0.02:
        rec.budget_notes.append(f"eager moved {100 * moved:+.1f}% between the baseline stage and the end: the "
                                "compile figures (timed at the start) carry that drift")
