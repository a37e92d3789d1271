"""The timing stage as the parent runs it (GPU, correct candidates only).

1. The candidate worker times ModelNew; this process's clock brackets the timed loop.
2. The baseline worker (never imports the candidate) times eager / eager+TF32 / torch.compile the
   same way, each loop bracketed too; cached per GPU and problem when the cache has them.
3. A secret subset of the candidate's timed calls is recomputed by the reference worker (their
   inputs drawn again from the timing key) and the sketches compared here.
4. Statistics and speedups come from the raw samples, computed here; the candidate's loop must
   fit the time its events claim plus the harness overhead measured on the eager baseline's loop.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kiln.tools.check import caches
from kiln.tools.check.workers import CommandFailed, WorkerGone, ok
from kiln.tools.records import EnvRecord, MemoryRecord, TimingIntegrity, TimingRecord

if TYPE_CHECKING:
    from kiln.tools.check.session import Session

LOOP_SHARE = 0.6  # of the timing stage's budget, split between the candidate's loop and each baseline's
MAX_SAMPLES = 20_000
N_RECHECK = 8  # timed outputs re-checked against the reference, picked in secret after the loop


def plan_timing(s: Session) -> None:
    """Decide the timing spec once the first trial's input size is known, and start what takes
    long early: the baseline worker (not cached ones) builds the problem's Model and compiles the
    torch.compile baseline while the candidate's trials run. Nothing is timed before step 1."""
    from kiln.tools.timing.stage import n_input_sets

    n_sets = n_input_sets(s.input_bytes)
    timing = {"key": s.seed("timing"), "n_sets": n_sets}
    cached = {n: hit for n in s.o.baselines if (hit := caches.baseline(s, n, n_sets)) is not None}
    missing = [n for n in s.o.baselines if n not in cached]
    s.timing_plan = {"timing": timing, "n_sets": n_sets, "cached": cached, "missing": missing}
    if missing:
        s.base = s._start(s._spec("baseline", cases=s.cases[:1]), caches.root() / "zygote")
        s.base.send("setup", seeds=s.case_seeds()["problem"])
        for name in missing:
            s.base.send("prepare", name=name, timing=timing)


def time_check(s: Session) -> None:
    from kiln.tools.timing.stage import METHOD
    from kiln.tools.timing.stats import speedup, summarize

    s.enter("timing")
    plan = s.timing_plan
    timing, n_sets = plan["timing"], plan["n_sets"]
    loop_s = LOOP_SHARE * s.budgets["timing"] / (1 + len(s.o.baselines))
    s._ref_call("release")
    cand = _candidate_loop(s, timing, loop_s)
    if s.cnd is not None:  # nothing of the candidate may run (a thread, a kernel) while baselines are timed
        s.cnd.close()
    base = {**plan["cached"], **_measure_baselines(s, plan["missing"], loop_s, n_sets)}
    rec = TimingRecord(measured=True, method=METHOD.format(n=n_sets), candidate=summarize(cand["samples_us"]))
    for name in s.o.baselines:
        run = base[name]
        if "error" in run:
            rec.baseline_errors[name] = run["error"]
            continue
        rec.baselines[name] = summarize(run["samples_us"])
        rec.speedups[name] = speedup(run["samples_us"], cand["samples_us"], name=name, threshold=s.o.speedup_threshold)
    rec.env = EnvRecord.model_validate(cand["env"]) if isinstance(cand.get("env"), dict) else None
    eager_peak = (base.get("eager") or {}).get("peak_bytes")
    rec.memory = MemoryRecord(candidate_peak_bytes=cand.get("peak_bytes"), reference_peak_bytes=eager_peak,
                              ratio=cand["peak_bytes"] / eager_peak if cand.get("peak_bytes") and eager_peak else None)
    s.rec.timing = rec
    s.rec.extra["timing_integrity"] = _integrity(s, timing, cand, base.get("eager")).model_dump()
    s.rec.extra["baselines_cached"] = sorted(plan["cached"])
    peaks = _peaks(s)
    if peaks:
        s.rec.extra["peaks"] = peaks
    s.rec.stages_s["timing"] = s._since("timing")


def _samples(reply: dict[str, Any]) -> list[float]:
    """The raw per-call times a worker reported, validated (finite, positive, bounded count)."""
    raw = reply.get("samples_us")
    if not isinstance(raw, list) or not raw or len(raw) > MAX_SAMPLES:
        n = len(raw) if isinstance(raw, list) else type(raw).__name__
        raise ValueError(f"no valid timing samples ({n})")
    out = [float(x) for x in raw if isinstance(x, (int, float)) and not isinstance(x, bool)]
    bad = [x for x in out if not (math.isfinite(x) and x >= 0)]
    if len(out) != len(raw) or bad:
        raise ValueError(f"timing samples that are not finite non-negative numbers (e.g. {bad[:3] or raw[:3]})")
    return out


def _candidate_loop(s: Session, timing: dict[str, Any], loop_s: float) -> dict[str, Any]:
    from kiln.tools.check.session import Failure

    s._call_cand("time_setup", timing=timing)
    s.enter("timing", "the candidate's timed loop")
    t0 = time.monotonic()
    reply = s._call_cand("time_loop", max_time_s=loop_s)
    wall = time.monotonic() - t0
    try:
        samples = _samples(reply)
    except ValueError as exc:
        raise Failure("crashed", [f"the candidate's timing run returned {exc}"]) from None
    s.enter("timing", "after the timed loop")
    after = s._call_cand("time_after")
    n = len(samples)
    first = reply.get("first_call") if isinstance(reply.get("first_call"), int) else 0
    return {"samples_us": samples, "wall_s": wall, "first_call": first, "n_calls": n,
            "sketches": reply.get("sketches"), "env": reply.get("env"),
            "threads": (reply.get("threads_before"), reply.get("threads_after")),
            "wall_probe": after.get("wall") if isinstance(after.get("wall"), dict) else {},
            "peak_bytes": after.get("peak_bytes") if isinstance(after.get("peak_bytes"), int) else None}


# ----------------------------------------------------------------------------- baselines


def _measure_baselines(s: Session, names: list[str], loop_s: float, n_sets: int) -> dict[str, dict[str, Any]]:
    """Time the baselines `plan_timing` had the baseline worker prepare, each loop bracketed by
    this process's clock, with the candidate's worker idle."""
    from kiln.tools.check.session import _reference_broken, _reference_error

    if not names:
        return {}
    assert s.base is not None
    out: dict[str, dict[str, Any]] = {}
    try:
        ok(s.base.recv(s.ref_deadline()))  # setup
        prepared = {name: _prepared(s, name) for name in names}  # every reply the plan's commands owe, in order
        for name in names:
            out[name] = prepared[name] or _one_baseline(s, name, loop_s)
            if "error" not in out[name]:
                caches.store_baseline(s, name, n_sets, out[name])
    except WorkerGone as gone:
        raise _reference_broken(s.rec.problem, gone, s.o.timeout_s) from None
    except CommandFailed as exc:
        raise _reference_error(s.rec.problem, exc.error) from None
    return out


def _prepared(s: Session, name: str) -> dict[str, Any]:
    """The reply to this baseline's `prepare` (sent with the plan): {} when ready, else its error."""
    assert s.base is not None
    try:
        ok(s.base.recv(s.ref_deadline()))
    except CommandFailed as exc:  # e.g. torch.compile failing on this problem: reported, not fatal
        return {"error": f"the {name} baseline could not be prepared: {str(exc.error.get('message', ''))[:300]}"}
    return {}


def _one_baseline(s: Session, name: str, loop_s: float) -> dict[str, Any]:
    assert s.base is not None
    t0 = time.monotonic()
    reply = s.base.call("time_loop", s.ref_deadline(), name=name, max_time_s=loop_s)
    try:
        samples = _samples(reply)
    except ValueError as exc:  # kiln's own harness on the problem's Model: reported, not fatal
        return {"error": f"the {name} baseline's timing run returned {exc}"}
    run = {"samples_us": samples, "wall_s": time.monotonic() - t0, "n_calls": reply.get("n_calls")}
    if name == "eager":
        run["peak_bytes"] = s.base.call("peak_memory", s.ref_deadline()).get("peak_bytes")
    return run


# ----------------------------------------------------------------------------- integrity of the timing


def _integrity(s: Session, timing: dict[str, Any], cand: dict[str, Any], eager: dict[str, Any] | None
               ) -> TimingIntegrity:
    ti = TimingIntegrity(distinct_inputs=True)
    ti.threads_before, ti.threads_after = cand["threads"]
    probe = cand["wall_probe"]
    ti.wall_over_event, ti.wall_us, ti.event_us = (probe.get(k) for k in ("wall_over_event", "wall_us", "event_us"))
    ti.n_calls = probe.get("n_calls")
    ti.timed_outputs_checked, ti.timed_outputs_failed = _recheck(s, timing, cand)
    _parent_bound(ti, cand, eager)
    return ti


def _parent_bound(ti: TimingIntegrity, cand: dict[str, Any], eager: dict[str, Any] | None) -> None:
    """What this process's clock saw of the candidate's loop, against what its events claim plus the
    harness's per-call overhead (measured on the eager baseline's loop, which runs the same harness)."""
    events_s = sum(cand["samples_us"]) * 1e-6
    ti.parent_wall_s, ti.parent_event_s = round(cand["wall_s"], 6), round(events_s, 6)
    ti.n_calls_loop = len(cand["samples_us"])
    if not eager or not eager.get("wall_s") or not eager.get("samples_us"):
        return
    n_b = len(eager["samples_us"])
    overhead_s = max(0.0, (float(eager["wall_s"]) - sum(eager["samples_us"]) * 1e-6) / n_b)
    n = len(cand["samples_us"])
    ti.overhead_us = round(overhead_s * 1e6, 3)
    ti.hidden_us_per_call = round((cand["wall_s"] - events_s - n * overhead_s) / n * 1e6, 3)
    ti.parent_per_call_us = round(max(0.0, cand["wall_s"] / n - overhead_s) * 1e6, 3)
    ti.median_us = round(sorted(cand["samples_us"])[n // 2], 3)


def _recheck(s: Session, timing: dict[str, Any], cand: dict[str, Any]) -> tuple[int, int]:
    """Recompute a secret subset of the timed calls in the reference worker and compare sketches."""
    from kiln.tools.check.session import secret_rng
    from kiln.tools.correctness import compare_sketches, tolerances

    sketches = _load_sketches(cand.get("sketches"))
    calls = list(range(cand["first_call"], cand["first_call"] + cand["n_calls"]))
    picked = sorted(secret_rng(s.secret).sample(calls, min(len(calls), N_RECHECK)))
    reply = s._ref_call("timed_refs", timing=timing, calls=picked, key=timing["key"])
    refs = load_pack_dict(reply["file"])
    atol, rtol = tolerances(s.o.dtype, s.o.atol, s.o.rtol)
    failed = 0
    for k in picked:
        exp, act = refs.get(str(k)), sketches.get(k) if sketches else None
        if exp is None or not _sketches_match(exp, act, atol, rtol, compare_sketches):
            failed += 1
    return len(picked), failed


def _sketches_match(exp: dict, act: Any, atol: float, rtol: float, compare_sketches: Any) -> bool:
    if not isinstance(act, dict) or not isinstance(act.get("outputs"), list):
        return False
    e_out, a_out = exp["outputs"], act["outputs"]
    if len(e_out) != len(a_out):
        return False
    for i, (e, a) in enumerate(zip(e_out, a_out, strict=True)):
        if e.get("kind") != "sketch":
            if e != a:
                return False
        elif not isinstance(a, dict) or a.get("dtype") != e.get("dtype") or \
                compare_sketches(e, a, atol=atol, rtol=rtol, name=f"out[{i}]") is not None:
            return False
    return True


def _load_sketches(path: Any) -> dict[int, Any] | None:
    if not isinstance(path, str):
        return None
    try:
        data = load_pack_dict(path)
    except Exception:  # noqa: BLE001 - the candidate wrote it: unreadable means every re-check fails
        return None
    return {int(k): v for k, v in data.items() if isinstance(k, (int, str)) and str(k).isdigit()}


def load_pack_dict(path: str) -> dict:
    import torch

    if Path(path).stat().st_size > (1 << 31):
        raise ValueError("timing sketches larger than 2 GiB")
    data = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(data, dict):
        raise ValueError("not a dict of sketches")
    return data


# ----------------------------------------------------------------------------- peaks


def _peaks(s: Session) -> dict[str, Any] | None:
    """The physics floor's peaks from kiln's one cache (`kiln.tools.peaks`), else measured now in a
    process running kiln's code only, pinned to this GPU, while the check's workers sit idle."""
    from kiln.tools import peaks
    from kiln.tools.sandbox.isolation import scrubbed_env

    env = scrubbed_env(device="cuda", gpu_index=s.o.gpu_index, cache_dir=caches.root() / "zygote")
    got = peaks.get(s.o.gpu_index, measure=s.rec.device == "cuda", env=env)
    return got.model_dump() if got else None
