"""The integrity verdict: the last step of every check, in the parent process.

`apply` judges the timing-integrity measurements, the physics floor and the speedup intervals,
escalates policy-dependent findings, and turns every finding of severity `reject` into
`status: "rejected"`, `correct: False` and a reason naming the rule. It is pure: it reads and
returns a `CheckRecord`, so a record can be re-judged offline.
"""

from __future__ import annotations

from kiln.tools.integrity.floor import floor
from kiln.tools.peaks import Peaks
from kiln.tools.records import CheckRecord, Finding, IntegrityRecord, Speedup, TimingIntegrity
from kiln.tools.timing.stats import RUN_TO_RUN

EXTRA_ROUND_SPEEDUP = 10.0
"""Any speedup above this triggers an extra verification round (more trials, new seeds, sizes)."""
DEFERRED_SHARE = 0.1
DEFERRED_MIN_US = 5.0
"""Work a candidate did in its refresh and commit steps beyond the baseline's (charged to its laps
anyway) is reported once it is this share of its time per call and at least this many us."""
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
    median = rec.timing.candidate.median_us if rec.timing and rec.timing.measured and rec.timing.candidate else None
    integ.findings += judge_timing(integ.timing, median)
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


def judge_timing(ti: TimingIntegrity | None, median_us: float | None = None) -> list[Finding]:
    """Findings from kiln's own timing measurements (`kiln.tools.check.timing`)."""
    if ti is None:
        return []
    out = []
    if ti.timed_outputs_failed:
        out.append(Finding(rule="timing.recheck-failed", severity="reject",
                           evidence=f"{ti.timed_outputs_failed} of {ti.timed_outputs_checked} outputs committed during "
                                    f"the timed laps did not match the reference's recomputation ({ti.audit_why}): "
                                    "what was timed is not what was checked"))
    deferred = ti.deferred_us_per_call or 0.0
    if median_us and deferred > DEFERRED_MIN_US and deferred > DEFERRED_SHARE * median_us:
        out.append(Finding(rule="timing.deferred-work", severity="warn",
                           evidence=f"the candidate's worker spent {deferred:.1f} us per call outside its timed laps "
                                    "beyond what the same steps cost the baseline (preparing inputs, committing "
                                    "outputs): work moved out of the lap, counted in its time anyway"))
    return out


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
        ph = floor(ph.bytes_moved, ph.flops, gbps=gbps, tflops=tflops, source=source, measured_us=measured)
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
