"""The integrity verdict: the last step of every check, in the parent process.

`apply` judges the timing-integrity measurements, the physics floor and the speedup intervals,
escalates policy-dependent findings, and turns every finding of severity `reject` into
`status: "rejected"`, `correct: False` and a reason naming the rule. It is pure: it reads and
returns a `CheckRecord`, so a record can be re-judged offline.
"""

from __future__ import annotations

from kiln.tools.integrity import physics
from kiln.tools.peaks import Peaks
from kiln.tools.records import CheckRecord, Finding, IntegrityRecord, Severity, Speedup, TimingIntegrity
from kiln.tools.timing.stats import RUN_TO_RUN

EXTRA_ROUND_SPEEDUP = 10.0
"""Any speedup above this triggers an extra verification round (more trials, new seeds, sizes)."""
WALL_OVER_EVENT_MAX = 1.5
"""Host wall time (around a device-wide sync, its fixed cost subtracted by the timer) may exceed
event time by this factor before we call it escaped work."""
ESCAPE_MIN_US = 20.0
"""...and by at least this much per call (the hidden work must matter, not the sync's jitter)."""
WALL_SLACK_US = 50.0
WALL_SLACK_PER_CALL_US = 50.0
"""Raw-totals fallback (no ratio): fixed and per-call allowance for sync and launch overhead."""
_DERIVED = ("timing.", "physics.")
"""Rules only the verdict produces."""
STRICT_ESCALATE = frozenset({"static.cpp-torch-op"})
"""Findings that are warnings under `partial` (parts in PyTorch are allowed) but rejections under
`strict` (no PyTorch compute at all)."""


def apply(record: CheckRecord, *, threshold: float = 1.0, peaks: Peaks | None = None) -> CheckRecord:
    """Judge `record` and return the updated copy."""
    rec = record.model_copy(deep=True)
    integ = rec.integrity or IntegrityRecord()
    rec.integrity = integ
    if integ.policy == "strict":
        integ.findings = [_escalate(f) for f in integ.findings]
    integ.findings = [f for f in integ.findings if not f.rule.startswith(_DERIVED)]  # re-judging is idempotent
    integ.findings += judge_timing(integ.timing)
    integ.findings += _judge_physics(rec, peaks)
    _noise_aware(rec, threshold)
    notes = []
    if integ.degenerate and integ.degenerate.degenerate:
        notes += [f"problem is degenerate ({r}); speedups on it mean nothing" for r in integ.degenerate.reasons]
    if needs_extra_round(rec) and not integ.extra_round:
        notes.append(f"speedup above {EXTRA_ROUND_SPEEDUP:g}x: needs an extra verification round")
    rec.reasons += [n for n in notes if n not in rec.reasons]
    _reject(rec, [f for f in integ.findings if f.severity == "reject"])
    return rec


def needs_extra_round(record: CheckRecord) -> bool:
    """Any measured speedup above 10x."""
    t = record.timing
    return bool(t and t.measured and any(s.value > EXTRA_ROUND_SPEEDUP for s in t.speedups.values()))


def judge_timing(ti: TimingIntegrity | None) -> list[Finding]:
    """Findings from COMPILE's timing-integrity measurements."""
    if ti is None:
        return []
    out = []
    if _escaped(ti):
        out.append(Finding(rule="timing.escaped-stream", severity="reject", evidence=_escaped_evidence(ti)))
    if ti.threads_before is not None and ti.threads_after is not None and ti.threads_after > ti.threads_before:
        out.append(Finding(rule="timing.threads", severity="reject",
                           evidence=f"threads grew from {ti.threads_before} to {ti.threads_after} during timed calls"))
    bound = _parent_bound(ti)
    if bound:
        sev: Severity = "reject" if bound.startswith(LOOP_TOO_SHORT) else "warn"
        out.append(Finding(rule="timing.parent-bound", severity=sev, evidence=bound))
    if ti.timed_outputs_failed:
        out.append(Finding(rule="timing.recheck-failed", severity="reject",
                           evidence=f"{ti.timed_outputs_failed} of {ti.timed_outputs_checked} outputs produced "
                                    "during timed runs did not match the reference"))
    return out


LOOP_TOO_SHORT = "the timed loop ended sooner than its own events"
"""A physical impossibility: a rejection. The hidden-time and median bounds below compare against a
harness overhead measured in another process; until calibrated on the H200 (bench/check_speed.py
records the inputs) they are warnings, so an honest kernel is never rejected by them."""
PARENT_HIDDEN_SHARE = 0.5
"""Time kiln's clock saw in the candidate's timed loop beyond its events and the harness overhead,
as a share of the event time, before it counts as work the events did not show..."""
PARENT_SLACK_US = 20.0
PARENT_SLACK_OVERHEAD = 0.25
"""...and it must also exceed this per call (plus this share of the measured per-call overhead,
whose run-to-run noise it covers): the overhead is measured on another process's loop."""


def _parent_bound(ti: TimingIntegrity) -> str | None:
    """The candidate's timed loop against kiln's own clock (outside the candidate's process): the
    loop can't end sooner than the events it reports, and can't take much longer than they say plus
    the harness overhead measured on the eager baseline's loop."""
    if ti.parent_wall_s is None or ti.parent_event_s is None:
        return None
    if ti.parent_wall_s < 0.95 * ti.parent_event_s:
        return (f"{LOOP_TOO_SHORT}: the candidate reported {ti.parent_event_s * 1e3:.1f} ms of timed calls, but "
                f"kiln's clock saw the whole loop take {ti.parent_wall_s * 1e3:.1f} ms: the reported times are forged")
    if ti.hidden_us_per_call is None or ti.overhead_us is None or not ti.n_calls_loop:
        return None
    per_call = ti.parent_event_s * 1e6 / ti.n_calls_loop
    slack = PARENT_SLACK_US + PARENT_SLACK_OVERHEAD * ti.overhead_us
    if ti.hidden_us_per_call > PARENT_HIDDEN_SHARE * per_call and ti.hidden_us_per_call > slack:
        return (f"kiln's clock saw {ti.hidden_us_per_call:.1f} us per timed call beyond the candidate's event time "
                f"({per_call:.1f} us) and the harness overhead ({ti.overhead_us:.1f} us, measured on the eager "
                "baseline's loop): work ran where the candidate's events did not show it, or its times are forged")
    if ti.hidden_us_per_call < -max(0.5 * ti.overhead_us, slack):
        return (f"the candidate's timed loop ended {-ti.hidden_us_per_call:.1f} us per call sooner than its event "
                f"times plus the harness overhead ({ti.overhead_us:.1f} us) allow: the reported times are forged")
    return _median_bound(ti, slack)


MEDIAN_SHARE = 0.5
"""The reported median may not be below half the mean per-call time kiln's clock saw (overhead
taken off): honest distributions have their median near their mean, outliers raise the mean by
percents, while a forgery that keeps the samples' sum but shrinks the median (many tiny samples and
a few huge ones) drives the two apart."""


def _median_bound(ti: TimingIntegrity, slack: float) -> str | None:
    if ti.median_us is None or ti.parent_per_call_us is None:
        return None
    if ti.median_us < MEDIAN_SHARE * ti.parent_per_call_us - slack:
        return (f"the candidate's reported median is {ti.median_us:.1f} us per call, but kiln's clock saw "
                f"{ti.parent_per_call_us:.1f} us per call (harness overhead taken off): the reported samples are "
                "forged or hide work")
    return None


def _escaped(ti: TimingIntegrity) -> bool:
    """Work outside the timed stream: the wall clock (sync cost subtracted) exceeds event time by
    more than `WALL_OVER_EVENT_MAX` *and* by more than `ESCAPE_MIN_US` per call, so jitter on a
    5 us kernel can't trip it."""
    per_call = ti.event_us / ti.n_calls if ti.event_us and ti.n_calls else None
    if ti.wall_over_event is not None:
        if ti.wall_over_event <= WALL_OVER_EVENT_MAX:
            return False
        if per_call is None:
            return ti.wall_over_event > 2 * WALL_OVER_EVENT_MAX
        return (ti.wall_over_event - 1.0) * per_call > ESCAPE_MIN_US
    if ti.wall_us is not None and ti.event_us is not None:
        slack = WALL_SLACK_US + WALL_SLACK_PER_CALL_US * (ti.n_calls or 1)
        return ti.wall_us > WALL_OVER_EVENT_MAX * ti.event_us + slack
    return False


def _escaped_evidence(ti: TimingIntegrity) -> str:
    if ti.wall_over_event is not None:
        return (f"host wall time around a device-wide sync is {ti.wall_over_event:.2f}x the event time of the same "
                f"calls ({ti.wall_us or 0:.0f} vs {ti.event_us or 0:.0f} us over {ti.n_calls or '?'} calls): "
                "work ran outside the timed stream")
    if ti.wall_us is not None and ti.event_us is not None:
        return (f"host wall time {ti.wall_us:.1f} us around a device-wide sync vs {ti.event_us:.1f} us "
                f"of event time over {ti.n_calls or '?'} calls: work ran outside the timed stream")
    return f"host wall / event time = {ti.wall_over_event:.2f}: work ran outside the timed stream"


def _judge_physics(rec: CheckRecord, peaks: Peaks | None) -> list[Finding]:
    integ = rec.integrity
    assert integ is not None
    ph = integ.physics
    measured = rec.timing.candidate.median_us if rec.timing and rec.timing.measured and rec.timing.candidate else None
    if ph is None or measured is None:
        return []
    if peaks is not None or ph.floor_us is None:
        gbps = peaks.copy_gbps if peaks else ph.peak_gbps
        tflops = peaks.floor_tflops(rec.dtype) if peaks else ph.peak_tflops
        source = peaks.source if peaks else (ph.peak_source or "record")
        ph = physics.floor(ph.bytes_moved, ph.flops, gbps=gbps, tflops=tflops, source=source, measured_us=measured)
    else:
        ph = ph.model_copy(update={"measured_us": measured, "pct_of_floor": 100.0 * ph.floor_us / measured})
    integ.physics = ph
    if ph.floor_us is None or measured >= ph.floor_us:
        return []
    return [Finding(rule="physics.faster-than-hardware", severity="reject",
                    evidence=f"measured {measured:.2f} us < {ph.bound} floor "
                             f"{ph.floor_us:.2f} us ({ph.bytes_moved} bytes at {ph.peak_gbps} GB/s, "
                             f"{ph.flops} FLOPs at {ph.peak_tflops} TFLOP/s, with margin)")]


def _noise_aware(rec: CheckRecord, threshold: float) -> None:
    if rec.timing is None:
        return
    rec.timing.speedups = {k: _verdict(s, threshold) for k, s in rec.timing.speedups.items()}


def _verdict(s: Speedup, threshold: float) -> Speedup:
    """Faster only if the CI's low end is above the threshold by the run-to-run spread
    (`RUN_TO_RUN`); slower only if its high end is that far below; anything nearer is a tie."""
    if s.ci_low > threshold * (1 + RUN_TO_RUN):
        v = "faster"
    elif s.ci_high < threshold / (1 + RUN_TO_RUN):
        v = "slower"
    else:
        v = "tie"
    return s.model_copy(update={"verdict": v})


def _escalate(f: Finding) -> Finding:
    if f.rule in STRICT_ESCALATE and f.severity == "warn":
        return f.model_copy(update={"severity": "reject", "evidence": f.evidence + " (strict policy)"})
    return f


def _reject(rec: CheckRecord, rejects: list[Finding]) -> None:
    """Reject findings first in `reasons`; the status they replace is kept as the last reason. A
    cheat that also crashed or failed to compile is still rejected: the verdict names the cheat.
    Correctness-side rules (`correctness.*`) make the candidate `incorrect`, not `rejected`."""
    if not rejects:
        return
    reasons = []
    for f in rejects:
        where = f" (line {f.line})" if f.line else ""
        prefix = "rejected: faster than the hardware allows" if f.rule == "physics.faster-than-hardware" else "rejected"
        reason = f"{prefix}: {f.rule}{where}: {f.evidence}"
        if reason not in rec.reasons and reason not in reasons:
            reasons.append(reason)
    rec.correct = False
    if all(f.rule.startswith("correctness.") for f in rejects):  # a failed check, not a cheat verdict
        rec.status = "incorrect"
        rec.reasons += [r for r in reasons if r not in rec.reasons]
        return
    if rec.status != "rejected":
        reasons.append(f"before the integrity verdict: {rec.status}")
    rec.status = "rejected"
    rec.reasons = reasons + rec.reasons
