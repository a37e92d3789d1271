"""The timing stage as the parent runs it (correct candidates only; GPU, or the CPU protocol test).

Every figure comes from this process's clock: each worker runs the same harness
(`kiln.tools.timing.laps`) one command at a time, refresh / lap / commit, and the parent times each
command. A sample is one lap's time per call. The candidate's refresh and commit steps, beyond what
the baseline worker's identical steps take (their medians, plus a slack), are added to its lap:
work a candidate moves out of the lap (precomputing after a refresh, finishing lazily when its
outputs are committed) is counted anyway. After all laps, a few (lap, slot) pairs picked in secret
are recomputed by the reference worker, which judges the projections the candidate committed for
them (`kiln.tools.timing.audit`). Baselines (eager, eager+TF32, torch.compile) run in the baseline
worker, which never imports the candidate, after the candidate's worker has been closed; they are
cached per problem, GPU and ring.
"""

from __future__ import annotations

import itertools
import statistics
import time
from typing import TYPE_CHECKING, Any

from kiln.tools.check import caches
from kiln.tools.check import messages as m
from kiln.tools.check.workers import CommandFailed, WorkerGone, WorkerHandle
from kiln.tools.records import EnvRecord, MemoryRecord, TimingIntegrity, TimingRecord
from kiln.tools.timing.laps import L2_SPAN_BYTES, RingSpec, ring_slots

if TYPE_CHECKING:
    from kiln.tools.check.session import Session

LOOP_SHARE = 0.6  # of the timing stage's budget, split between the candidate's laps and each baseline's
MIN_LAPS, MAX_LAPS, WARM_LAPS = 8, 60, 1  # per function; its time cap and CI target are CheckOptions'
STEPS_TARGET_PCT = 100.0  # the steps timed again (`_steps_now`) need a median and a spread, not a tight lap: 8 laps
N_AUDIT = 16  # timed (lap, slot) pairs the reference recomputes, picked in secret after the laps
CPU_SLOTS = 4
SLACK_SHARE = 0.02  # the candidate's median refresh + commit may exceed the baseline's by this share of it, plus...
SLACK_SE = 2.0  # ...this many standard errors of the difference of the two medians (the baseline's noise)
METHOD = ("kiln's clock over laps of {slots} back-to-back calls, each on its own independent draw of the inputs "
          "(fixed addresses, new draws every lap; inputs and outputs of a lap span >= {span} MiB where memory allows); "
          "a sample is a lap's time per call; the candidate's median refresh + commit time beyond the baseline worker's "
          "median for the identical steps (past 2% and two standard errors) is added to every lap; every lap's outputs committed as "
          "keyed projections and {audit} (lap, slot) pairs picked in secret recomputed by the reference; baselines "
          "timed the same way, after the candidate's worker has ended, in a process that never imported it")


def plan_timing(s: Session) -> None:
    """The ring, once the first trial's input and output sizes are known; and the baseline worker
    (for baselines not cached) started now, so the torch.compile baseline compiles while the
    candidate's trials run. Nothing is timed before `time_check`."""
    slots = ring_slots(s.input_bytes, s.output_bytes)
    if s.rec.device == "cpu":  # the protocol test (`time_on_cpu`): no L2 to span, interpreted kernels
        slots = min(slots, CPU_SLOTS)
    ring = RingSpec(key=s.seed("timing"), slots=slots, dtype=s.o.dtype, device=s.rec.device)
    cached = {n: hit for n in s.o.baselines if (hit := caches.baseline(s, n, ring.slots)) is not None}
    missing = [n for n in s.o.baselines if n not in cached]
    s.timing_plan = {"ring": ring, "cached": cached, "missing": missing}
    if missing:
        s.base = s._start(s._spec("baseline", cases=s.cases[:1]), caches.baseline_cache())
        s.base.send(m.BaseSetup(seeds=s.case_seeds()["problem"]))
        for name in missing:
            s.base.send(m.BasePrepare(name=name, ring=ring.model_dump()))


def time_check(s: Session) -> None:
    from kiln.tools.timing.stats import speedup, summarize

    s.enter("timing")
    plan = s.timing_plan
    ring: RingSpec = plan["ring"]
    loop_s = LOOP_SHARE * s.budgets["timing"] / (1 + len(s.o.baselines))
    loop_s = min(loop_s, s.o.timing_laps_s)
    s.ref_call(m.Release(), "release")
    prepared = _baselines_prepared(s, plan["missing"])  # torch.compile done: nothing else runs on the GPU now
    part = _Parts()  # where the timing stage's seconds went (stages_s["timing.<part>"])
    _candidate_setup(s, ring)  # the ring and untimed warm-up laps: before the lock, as trials run beside it
    part("setup")
    base: dict[str, dict[str, Any]] = dict(plan["cached"])
    with _exclusive(s) as waited:
        part.start()
        locked_at = part.mark
        env_before = _env(s)
        crowd = [_gpu_processes(s)]
        sigma = _sigma(s)
        part("env")
        cand = _candidate_laps(s, ring, loop_s, sigma)
        part("candidate_laps")
        crowd.append(_gpu_processes(s))
        charged = _charged_by_cache(cand, plan, ring, s.o.timing_target_pct)
        if plan["missing"] or charged:
            _close_candidate(s)  # nothing of the candidate may run (a thread, a kernel) while baselines are timed
            part("close_candidate")
            base.update(_measure_baselines(s, plan["missing"], prepared, loop_s, ring, sigma))
            crowd.append(_gpu_processes(s, closing=1))  # the candidate's context may outlive its process
            if charged:  # a charge is judged against the same steps timed now, in this check's conditions
                base["eager"] = {**base["eager"], **_steps_now(s, ring, loop_s, sigma)}
            part("baselines")
        held = time.monotonic() - locked_at
    if s.cnd is not None and s.cnd.proc.poll() is None:  # every baseline came from the cache: nothing more is
        s.cnd.ask_exit()  # timed, so it exits after the lock, its teardown beside the audit (collected at the end)
        part("close_candidate")
    _typed_commits(s, cand["laps"])  # beside the candidate worker's teardown
    if waited is not None:
        s.rec.stages_s["timing_wait"] = waited
    elif s.o.exclusive_timing:
        s.rec.reasons.append("timed without the GPU's timing lock: another check held it for the whole wait, so "
                             "both may have timed at once")
    eager = base.get("eager") if "error" not in (base.get("eager") or {"error": 1}) else None
    samples, deferred = charged_samples(cand, eager, ring.slots)
    rec = TimingRecord(measured=True, method=METHOD.format(slots=ring.slots, span=L2_SPAN_BYTES >> 20, audit=N_AUDIT),
                       candidate=summarize(samples))
    for name in s.o.baselines:
        run = base[name]
        if "error" in run:
            rec.baseline_errors[name] = run["error"]
            continue
        rec.baselines[name] = summarize(run["samples_us"])
        rec.speedups[name] = speedup(run["samples_us"], samples, name=name, threshold=s.o.speedup_threshold)
    rec.env = _env_after(env_before)
    if rec.env is not None:
        from kiln.tools.gpuenv import others

        rec.env.other_gpu_processes = others([c for c in crowd if c is not None])
        if rec.env.other_gpu_processes:
            s.rec.reasons.append(f"timed while {rec.env.other_gpu_processes} other process(es) held the GPU: their "
                                 "kernels share it, so the times and speedups may be off")
    eager_peak = (eager or {}).get("peak_bytes")
    rec.memory = MemoryRecord(candidate_peak_bytes=cand.get("peak_bytes"), reference_peak_bytes=eager_peak,
                              ratio=cand["peak_bytes"] / eager_peak if cand.get("peak_bytes") and eager_peak else None)
    s.rec.timing = rec
    s.evidence["timing_integrity"] = _integrity(s, ring, cand, eager, deferred, sigma)
    s.evidence["baselines_cached"] = sorted(plan["cached"])
    part("summary_and_audit")
    peaks = _peaks(s)
    if peaks:
        s.evidence["peaks"] = peaks
    part("peaks")
    s.rec.stages_s["timing"] = s._since("timing")
    s.rec.stages_s.update({f"timing.{k}": round(v, 3) for k, v in part.seconds.items()})
    s.rec.stages_s["timing_locked"] = round(held, 3)  # how long this check held the GPU's timing lock


class _Parts:
    """Consecutive parts of a stage: `part(name)` ends the part running since the last call."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.start()

    def start(self) -> None:
        self.mark = time.monotonic()

    def __call__(self, name: str) -> None:
        now = time.monotonic()
        self.seconds[name] = now - self.mark
        self.mark = now


def _exclusive(s: Session) -> Any:
    """This GPU's timing lock (`kiln.tools.timing.exclusive`), waited for up to half the timing
    stage's budget (on the CPU too, where `time_on_cpu` tests the protocol); a no-op when the caller
    asked for none."""
    import contextlib

    from kiln.tools.timing.exclusive import gpu_timing_lock

    if not s.o.exclusive_timing:
        return contextlib.nullcontext(None)
    return gpu_timing_lock(caches.root() / "locks", s.o.gpu_index if s.rec.device == "cuda" else -1, 0.5 * s.budgets["timing"])


def _sigma(s: Session) -> list[float]:
    """Each output leaf's RMS on the x1 trials (the scale of the committed projections)."""
    first = s.ref_replies.get(s.todo[0].tag) if s.todo else None
    rms = s.comparer.rms if s.comparer else {}
    return [float(rms.get(lf.name, 1.0)) for lf in (first.leaves if first else [])] or [1.0]


# ----------------------------------------------------------------------------- laps


class Laps:
    """One worker's laps for one function: each step's time on kiln's clock, and what it committed."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.refresh_s: list[float] = []
        self.lap_s: list[float] = []
        self.commit_s: list[float] = []
        self.committed: dict[int, Any] = {}  # lap -> its CommitReply during the laps, its typed slots after
        self.keys: dict[int, int] = {}  # lap -> its commit key
        self.input_keys: dict[int, int] = {}  # lap -> its input key

    def per_call_us(self, slots: int) -> list[float]:
        return [t / slots * 1e6 for t in self.lap_s]

    def overhead(self) -> list[float]:
        """Each lap's refresh + commit (seconds)."""
        return [r + c for r, c in zip(self.refresh_s, self.commit_s, strict=True)]

    def done(self, slots: int, elapsed: float, loop_s: float, target_pct: float) -> bool:
        from kiln.tools.timing.stats import should_stop

        n = len(self.lap_s)
        if n < MIN_LAPS:
            return False
        if n >= MAX_LAPS or elapsed > loop_s:
            return True
        stop, _ = should_stop(self.per_call_us(slots), elapsed, max_time_s=loop_s, min_samples=MIN_LAPS,
                              target_pct=target_pct, max_samples=MAX_LAPS)
        return stop


def run_laps(call: Any, name: str, ring: RingSpec, loop_s: float, sigma: list[float], key_of: Any,
             target_pct: float, setup: m.Msg | None = None) -> Laps:
    """Refresh / lap / commit until the median is tight or the time is spent; `call(cmd)` sends one
    command and returns its reply, `key_of(lap, "inputs" | "commit")` the lap's secret keys (each sent
    only with the step that uses it); `setup`, a command sent first (untimed)."""
    laps = Laps(name)
    if setup is not None:
        call(setup)
    for lap in range(-WARM_LAPS, 0):  # untimed: the first laps after a switch pay allocator and cache effects
        call(m.Refresh(lap=lap, key=key_of(lap, "inputs"), name=name))
        call(m.Lap(name=name))
    t_start = time.monotonic()
    lap = 0
    while not laps.done(ring.slots, time.monotonic() - t_start, loop_s, target_pct):
        lap += 1
        laps.input_keys[lap] = key_of(lap, "inputs")
        t0 = time.monotonic()
        call(m.Refresh(lap=lap, key=laps.input_keys[lap], name=name))
        t1 = time.monotonic()
        call(m.Lap(name=name))
        t2 = time.monotonic()
        laps.keys[lap] = key_of(lap, "commit")
        reply = call(m.Commit(key=laps.keys[lap], sigma=sigma, name=name))
        t3 = time.monotonic()
        laps.refresh_s.append(t1 - t0)
        laps.lap_s.append(t2 - t1)
        laps.commit_s.append(t3 - t2)
        laps.committed[lap] = reply if isinstance(reply, m.CommitReply) else m.CommitReply()
    return laps


def _candidate_setup(s: Session, ring: RingSpec) -> None:
    """The candidate's ring and its untimed warm-up laps (JIT, allocator growth)."""
    s.enter("timing", "the candidate's timing set-up")
    s._call_cand(m.TimeSetup(ring=ring.model_dump()))


def _candidate_laps(s: Session, ring: RingSpec, loop_s: float, sigma: list[float]) -> dict[str, Any]:
    s.enter("timing", "the candidate's timing laps")
    laps = run_laps(s._call_cand, "candidate", ring, loop_s, sigma, lambda lap, what: s.seed(what, lap),
                    s.o.timing_target_pct)
    s.enter("timing", "after the timing laps")
    peak = s._call_cand(m.PeakMemory())
    return {"laps": laps, "peak_bytes": getattr(peak, "peak_bytes", None)}


def _typed_commits(s: Session, laps: Laps) -> None:
    """Type every slot the candidate committed, now that the lock is free (`m.CommitReply`); one that
    does not fit its record is the candidate's worker breaking the protocol."""
    from pydantic import ValidationError

    from kiln.tools.check.workers import invalid_reply

    for lap, reply in laps.committed.items():
        try:
            laps.committed[lap] = reply.as_dicts()
        except ValidationError as exc:
            raise s._gone(invalid_reply("commit", exc, s.cnd)) from None


def _close_candidate(s: Session) -> None:
    if s.cnd is not None:
        s.cnd.close()


def _charged_by_cache(cand: dict[str, Any], plan: dict[str, Any], ring: RingSpec, target_pct: float) -> bool:
    """Would the cached eager baseline's refresh + commit figures charge the candidate by more than the
    precision the check asks for (`timing_target_pct` of its median call)? Then those steps are timed
    again now, under the same load (`_steps_now`). A smaller charge is applied against the cache as it
    stands (never dropped: a charge only makes the candidate slower): timing again for it held a small
    problem's check in the GPU's timing lock longer (0.42 s of laps, 0.70 s of eager again, on an H100
    in the reward burst, before `_steps_now`) to move a figure inside its own CI."""
    if "eager" not in plan["cached"]:
        return False
    samples, per_call = charged_samples(cand, plan["cached"]["eager"], ring.slots)
    if per_call <= 0:
        return False
    lap = statistics.median(samples) - per_call
    return per_call > target_pct / 100 * lap


def charged_samples(cand: dict[str, Any], eager: dict[str, Any] | None, slots: int) -> tuple[list[float], float]:
    """The candidate's per-call samples (us): each lap plus the charge, and the charge per call (us).

    The charge is how much longer the candidate's median refresh + commit took than the baseline
    worker's median for the identical steps, beyond 2% of the baseline's and two standard errors of
    the difference of the medians. Work moved out of the lap into these steps is counted, and the
    two workers' noise is not (an honest kernel runs kiln's own code there).
    - Medians, not means: one long sleep in one commit widened a mean's standard error past the whole
      deferred work and zeroed the charge; it moves no median, and spreading work over fewer than
      half of the laps leaves the median lap honest.
    - The noise is the baseline's, never the candidate's own: a commit that slept on every other lap
      made its own MAD as large as the deferred work and zeroed the charge again. Both standard
      errors come from the baseline's spread (1.4826 MAD), each with its own side's lap count."""
    laps: Laps = cand["laps"]
    own = laps.overhead()
    if not own:
        return [], 0.0
    extra = max(0.0, statistics.median(own) - allowance_s(len(own), eager))
    per_call = extra / slots * 1e6
    return [t / slots * 1e6 + per_call for t in laps.lap_s], per_call


def allowance_s(n_laps: int, eager: dict[str, Any] | None) -> float:
    """The refresh + commit time per lap a candidate's steps may take before any of it is charged:
    the baseline's median plus 2% and two standard errors of the difference of two medians (0 when
    no baseline measured its steps: then they are charged whole, never flatter)."""
    base = [float(x) for x in (eager or {}).get("overhead_s") or []]
    if not base or n_laps < 1:
        return 0.0
    med_b = statistics.median(base)
    spread = 1.4826 * statistics.median(abs(x - med_b) for x in base)
    se = 1.2533 * spread * (1 / n_laps + 1 / len(base)) ** 0.5
    return med_b * (1 + SLACK_SHARE) + SLACK_SE * se


# ----------------------------------------------------------------------------- baselines


def _baselines_prepared(s: Session, names: list[str]) -> dict[str, dict[str, Any]]:
    """Wait for the baseline worker's setup and every `prepare` (torch.compile compiles there), before
    anything is timed; {name: {}} when ready, else its error."""
    from kiln.tools.check.failures import reference_broken, reference_error

    if not names:
        return {}
    assert s.base is not None
    try:
        s.base.recv_reply(s.ref_deadline())  # setup
        return {name: _prepared(s, s.base, name) for name in names}
    except WorkerGone as gone:
        raise reference_broken(s.rec.problem, gone, s.o.timeout_s) from None
    except CommandFailed as exc:
        raise reference_error(s.rec.problem, exc.error) from None


def _measure_baselines(s: Session, names: list[str], prepared: dict[str, dict[str, Any]], loop_s: float,
                       ring: RingSpec, sigma: list[float]) -> dict[str, dict[str, Any]]:
    """Time the prepared baselines, with the candidate's worker gone."""
    from kiln.tools.check.failures import reference_broken, reference_error

    out: dict[str, dict[str, Any]] = {}
    if not names:
        return out
    assert s.base is not None
    try:
        for name in names:
            out[name] = prepared[name] or _one_baseline(s, s.base, name, loop_s, ring, sigma)
            if "error" not in out[name]:
                caches.store_baseline(s, name, ring.slots, out[name])
    except WorkerGone as gone:
        raise reference_broken(s.rec.problem, gone, s.o.timeout_s) from None
    except CommandFailed as exc:
        raise reference_error(s.rec.problem, exc.error) from None
    return out


def _steps_now(s: Session, ring: RingSpec, loop_s: float, sigma: list[float]) -> dict[str, Any]:
    """The refresh + commit steps of the cached eager baseline, timed again in this check, when the
    cached figures would charge the candidate: they were timed in another check, on a GPU and host
    that may have been busier or idler (seen on the H200: a cached 62 ms refresh against the
    candidate's 146 ms charged an honest group norm 428 us a call, 0.13x for a 1.67x kernel). The
    reference worker, which never imports the candidate and is already running, times the identical
    harness on the problem's Model (the candidate's worker is closed by now); a real deferral is
    still charged. Only the allowance changes: eager's cached laps stand, and the cache is not
    rewritten with one check's conditions. Before, eager was timed whole in a baseline worker
    started inside the timing lock: 0.70 s of a small problem's reward check on an H100."""
    n = itertools.count()
    laps = run_laps(lambda cmd: s.ref_call(cmd, f"steps.{next(n)}"), "eager", ring, loop_s, sigma,
                    lambda lap, what: s.seed("steps", what, lap), STEPS_TARGET_PCT,
                    setup=m.TimeSetup(ring=ring.model_dump(), name="eager"))
    s.ref_call(m.Release(), "release.steps")
    return {"overhead_s": laps.overhead(), "refresh_s": statistics.median(laps.refresh_s),
            "commit_s": statistics.median(laps.commit_s), "steps_now": True}


def _prepared(s: Session, base: WorkerHandle, name: str) -> dict[str, Any]:
    """The reply to this baseline's `prepare` (sent with the plan): {} when ready, else its error."""
    try:
        base.recv_reply(s.ref_deadline())
    except CommandFailed as exc:  # e.g. torch.compile failing on this problem: reported, not fatal
        return {"error": f"the {name} baseline could not be prepared: {str(exc.error.get('message', ''))[:300]}"}
    return {}


def _one_baseline(s: Session, base: WorkerHandle, name: str, loop_s: float, ring: RingSpec, sigma: list[float]
                  ) -> dict[str, Any]:
    laps = run_laps(lambda cmd: base.call(cmd, s.ref_deadline()), name, ring, loop_s, sigma,
                    lambda lap, what: s.seed("baseline", what, name, lap), s.o.timing_target_pct)
    run: dict[str, Any] = {"samples_us": laps.per_call_us(ring.slots), "overhead_s": laps.overhead(),
                           "refresh_s": statistics.median(laps.refresh_s), "commit_s": statistics.median(laps.commit_s)}
    if name == "eager":
        run["peak_bytes"] = getattr(base.call(m.PeakMemory(name=name), s.ref_deadline()), "peak_bytes", None)
    return run


# ----------------------------------------------------------------------------- what the timing proves


def _integrity(s: Session, ring: RingSpec, cand: dict[str, Any], eager: dict[str, Any] | None, deferred: float,
               sigma: list[float]) -> TimingIntegrity:
    laps: Laps = cand["laps"]
    ti = TimingIntegrity(distinct_inputs=True, method="laps", n_laps=len(laps.lap_s), slots=ring.slots,
                         deferred_us_per_call=round(deferred, 3),
                         uncharged_us_per_call=round(allowance_s(len(laps.lap_s), eager) / ring.slots * 1e6, 3),
                         cand_refresh_s=round(statistics.median(laps.refresh_s), 6) if laps.refresh_s else None,
                         cand_commit_s=round(statistics.median(laps.commit_s), 6) if laps.commit_s else None,
                         base_refresh_s=(eager or {}).get("refresh_s"), base_commit_s=(eager or {}).get("commit_s"),
                         base_steps_now=bool((eager or {}).get("steps_now")),
                         span_bytes=ring.slots * (s.input_bytes + s.output_bytes))
    _audit(s, ring, laps, sigma, ti)
    return ti


def _audit(s: Session, ring: RingSpec, laps: Laps, sigma: list[float], ti: TimingIntegrity) -> None:
    """The reference recomputes secretly picked timed iterations and judges their projections."""
    from kiln.tools.check.failures import secret_rng

    pairs = [(lap, slot) for lap in laps.committed for slot in range(ring.slots)]
    picks = sorted(secret_rng(s.secret).sample(pairs, min(len(pairs), N_AUDIT)))
    committed = {f"{lap}.{slot}": _slot(laps.committed[lap], slot) for lap, slot in picks}
    atol, rtol = _tolerances(s)
    rel = s.comparer.rel_err() if s.comparer else 0.0
    tight = bool(s.numerics and s.comparer and s.comparer.numerics_decided())
    reply = s.ref_call(m.RefAudit(ring=ring.model_dump(), picks=picks, projections=committed,
                                  commit_keys={str(k): v for k, v in laps.keys.items()},
                                  input_keys={str(k): v for k, v in laps.input_keys.items()}, sigma=sigma,
                                  rel_err=rel, tight=tight, atol=atol, rtol=rtol), "audit")
    verdicts = getattr(reply, "verdicts", [])
    ti.timed_outputs_checked = len(verdicts)
    failed = [v for v in verdicts if not v.passed]
    ti.timed_outputs_failed = len(failed) + max(0, len(picks) - len(verdicts))
    ti.audit_worst = max((v.stat for v in verdicts if v.stat is not None), default=None)
    if failed:
        ti.audit_why = f"lap {failed[0].lap}, slot {failed[0].slot}: {failed[0].why}"


def _slot(committed: list[dict[str, Any]], slot: int) -> dict[str, Any]:
    return committed[slot] if 0 <= slot < len(committed) and isinstance(committed[slot], dict) else {}


def _tolerances(s: Session) -> tuple[float, float]:
    from kiln.tools.rule import tolerances

    return tolerances(s.o.dtype, s.o.atol, s.o.rtol)


def _env(s: Session) -> EnvRecord | None:
    """The GPU as kiln's own process sees it through NVML (nothing the candidate reports)."""
    from kiln.tools import gpuenv

    try:
        return gpuenv.env_record(s.rec.device, s.o.gpu_index)
    except Exception:  # noqa: BLE001 - an environment record is context, never a verdict
        return None


def _gpu_processes(s: Session, closing: int = 0) -> tuple[int, int] | None:
    """(processes holding the GPU now, how many of them may be this check's own: its live workers and
    the `closing` ones it has just closed)."""
    from kiln.tools import gpuenv

    try:
        n = gpuenv.gpu_processes(s.o.gpu_index) if s.rec.device == "cuda" else None
    except Exception:  # noqa: BLE001 - context, never a verdict
        return None
    own = closing + sum(h is not None and h.proc.poll() is None for h in (s.cnd, s.ref, s.base, s.case_ref))
    return None if n is None else (n, own)


def _env_after(before: EnvRecord | None) -> EnvRecord | None:
    from kiln.tools import gpuenv

    return gpuenv.env_after(before) if before is not None else None


# ----------------------------------------------------------------------------- peaks


def _peaks(s: Session) -> dict[str, Any] | None:
    """The physics floor's peaks from kiln's one cache (`kiln.tools.peaks`), else measured now in a
    process running kiln's code only, pinned to this GPU, while the check's workers sit idle."""
    from kiln.tools import peaks
    from kiln.tools.sandbox.isolation import scrubbed_env

    env = scrubbed_env(device="cuda", gpu_index=s.o.gpu_index, cache_dir=caches.root() / "zygote")
    got = peaks.get(s.o.gpu_index, measure=s.rec.device == "cuda", env=env)
    return got.model_dump() if got else None
