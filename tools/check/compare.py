"""Parent side of correctness: gather each trial's verdicts from the judge (the reference worker,
`kiln.tools.check.judging`), note input mutation, score the groups, and summarise for the Coder.
No output is loaded here and nothing here needs torch: the candidate's worker sends only claims, the
judge sends verdicts as typed records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kiln.tools.check.messages import CandPackReply, CandTrialReply, RefJudgeReply, RefTrialReply
from kiln.tools.draws import DISTRIBUTIONS
from kiln.tools.records import CaseSummary, DegenerateRecord, Finding, TrialRecord

DIST_WORDS = {name: d.words for name, d in DISTRIBUTIONS.items()}
PHASE_WORDS = {"first_call": "first call", "second_call": "second call on the same inputs"}


@dataclass
class Comparison:
    trials: list[TrialRecord] = field(default_factory=list)
    passed: bool = False
    first_failure: str | None = None
    short_reason: str | None = None
    input_mutated: bool = False
    findings: list[Finding] = field(default_factory=list)
    problem_error: str | None = None  # the problem itself is nondeterministic: not the candidate's fault
    n_planned: int = 0
    n_planned_by_case: dict[str, int] = field(default_factory=dict)
    groups_planned: list[str] = field(default_factory=list)
    not_attempted: list[str] = field(default_factory=list)
    cases: dict[str, CaseSummary] = field(default_factory=dict)
    # tolerance (issue 16): the rule in force, the fixed atol/rtol rule's verdict over the same trials
    # (None: not every trial ran), groups the reference dropped (not finite), the problem's degeneracy
    rule: str = "numerics"
    legacy_passed: bool | None = None
    dropped: dict[str, str] = field(default_factory=dict)
    degenerate: DegenerateRecord | None = None

    @property
    def score(self) -> float | None:
        """Passed groups / planned groups: a group passes when every trial of it that ran passed."""
        if not self.groups_planned:
            return None
        failed = {_group(t) for t in self.trials if not t.passed}
        ran = {_group(t) for t in self.trials}
        return sum(g in ran and g not in failed for g in self.groups_planned) / len(self.groups_planned)


def _group(t: TrialRecord) -> str:
    return f"{t.case}/{t.distribution}"


def describe(t: TrialRecord) -> str:
    return (f"case '{t.case}', {DIST_WORDS.get(t.distribution, t.distribution)}, trial {t.trial} "
            f"({PHASE_WORDS.get(t.phase, t.phase)})")


@dataclass
class TrialData:
    """One trial as the workers reported it: the reference's trial reply, the candidate's two
    (claims), and the judge's verdict."""

    case: str
    dist: str
    trial: int
    ref: RefTrialReply
    cand: CandTrialReply
    packed: CandPackReply
    verdict: RefJudgeReply


class TrialComparer:
    """Keeps the running verdict as the session hands trials over. `numerics`: the numerics rule
    decides (kiln.tools.tolerance); False when --atol/--rtol were given."""

    def __init__(self, atol: float, rtol: float, *, dtype: str = "fp32", numerics: bool = False) -> None:
        self.atol, self.rtol, self.dtype, self.numerics = atol, rtol, dtype, numerics
        self.cmp = Comparison(rule="numerics" if numerics else "atol_rtol")
        self.rms: dict[str, float] = {}

    @property
    def failed(self) -> bool:
        """The candidate failed, and its remaining trials would tell nothing new: a candidate that
        fails only one of the two rules runs on, so both verdicts are on record (issue 16)."""
        if self.cmp.problem_error is not None:
            return True
        new = any(not t.passed for t in self.cmp.trials)
        return new and (not self.numerics or any(not t.legacy_atol_rtol_passed for t in self.cmp.trials))

    def drop(self, group: str, why: str) -> None:
        """The reference is not finite on this (case, wide distribution): no trials of it."""
        self.cmp.dropped[group] = why

    def add(self, d: TrialData) -> list[TrialRecord]:
        records = self._records(d)
        if d.cand.input_fp and d.cand.input_fp != d.ref.input_fp:
            for r in records:
                r.passed = r.legacy_atol_rtol_passed = False
                r.error = ("its worker reports inputs that differ from the reference's for the same trial: it did not "
                           "compute on the trial's inputs")
        mutated = d.cand.mutated or d.packed.mutated
        if mutated and not d.ref.mutated:
            _mutation(self.cmp, records)
        self.cmp.trials += records
        self.rms.update(d.verdict.rms)
        return records

    def _records(self, d: TrialData) -> list[TrialRecord]:
        out: list[TrialRecord] = []
        times = {"first_call": d.cand.call_s, "second_call": d.packed.call_s}
        for v in d.verdict.phases:
            out.append(TrialRecord(case=d.case, distribution=d.dist, trial=d.trial, phase=v.phase, passed=v.passed,
                                   mismatch=v.mismatch, error=v.error, input_mutated=d.cand.mutated,
                                   rel_l2_err=v.rel_l2_err, candidate_s=_secs(times.get(v.phase)), rule=v.rule,
                                   legacy_atol_rtol_passed=v.legacy_atol_rtol_passed, outputs=v.outputs))
        return out

    def finish(self, *, complete: bool) -> Comparison:
        """`complete`: every planned trial ran (no early stop, no time-out)."""
        cmp = self.cmp
        bad = next((t for t in cmp.trials if not t.passed), None)
        cmp.passed = complete and bad is None and cmp.problem_error is None and bool(cmp.trials)
        cmp.legacy_passed = _legacy_verdict(cmp, complete)
        if cmp.passed:
            hidden_error(cmp, self.rtol)
        if bad is not None:
            if bad.mismatch is None and bad.error is None:  # failed by mutation only
                cmp.first_failure = (f"ModelNew.forward wrote into its input tensors on {describe(bad)}. Inputs are "
                                     "read-only: allocate the output (and any scratch) separately.")
            else:
                # torch: imported here, not at module import (see kiln.tools.draws)
                from kiln.tools.rule import first_failure

                cmp.first_failure = first_failure(describe(bad), bad.mismatch, None if bad.mismatch else bad.error)
            cmp.short_reason = _short(bad)
        return cmp

    def rel_err(self) -> float:
        """The candidate's worst relative L2 error on the unscaled (x1) trials: the error level its
        timed outputs are held to (`kiln.tools.timing.audit`)."""
        errs = [t.rel_l2_err for t in self.cmp.trials if t.distribution == "x1" and t.rel_l2_err is not None]
        return max(errs, default=0.0)


    def numerics_decided(self) -> bool:
        """Did the numerics rule (or exact equality) judge every unscaled (x1) trial?"""
        x1 = [t for t in self.cmp.trials if t.distribution == "x1"]
        return bool(x1) and all(t.rule in ("numerics", "exact") for t in x1)


def _secs(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _legacy_verdict(cmp: Comparison, complete: bool) -> bool | None:
    """What the fixed atol/rtol rule (its hidden-error rejection included) says over the same trials."""
    if any(not t.legacy_atol_rtol_passed for t in cmp.trials):
        return False
    if not complete or cmp.problem_error is not None or not cmp.trials:
        return None
    return not any((t.rel_l2_err or 0.0) >= GROSS_REL_L2 for t in cmp.trials)


def _mutation(cmp: Comparison, records: list[TrialRecord]) -> None:
    for r in records:
        r.passed = r.legacy_atol_rtol_passed = False
    if not cmp.input_mutated:
        cmp.input_mutated = True
        t = records[0]
        cmp.findings.append(Finding(
            rule="correctness.input-mutation", severity="reject",
            evidence=f"ModelNew.forward changed its input tensors on {describe(t)}; the reference does not"))


# a passing output whose relative L2 error exceeds rtol gets a warning: honest fp32 kernels (another
# summation order) sit near 1e-7..1e-6, a softmax with a +1 in its denominator at ~1/row-sum (4e-4)
HIDDEN_ERROR_FACTOR = 1.0
GROSS_REL_L2 = 0.05
"""A relative L2 error no honest kernel reaches at any dtype kiln checks (fp32 ones measure ~1e-7,
bf16 rounding ~4e-3): all zeros (1.0) for a softmax whose outputs all lie below atol, as
KernelBench's 23_Softmax's do (1/393216 each). Past it the hidden error rejects the candidate."""


def hidden_error(cmp: Comparison, rtol: float) -> None:
    """Warn when every element passed but the output as a whole is off by more than rtol: an
    error below atol in absolute terms (a wrong normalisation on a small-valued output, say).
    Reject when it is off by `GROSS_REL_L2` or more (zeros for outputs that all lie below atol).
    Trials the numerics rule judged have no fixed atol to hide under (issue 16): not checked."""
    rels = [t for t in cmp.trials if t.passed and t.rel_l2_err is not None and t.rule != "numerics"]
    worst = max(rels, key=lambda t: t.rel_l2_err or 0.0, default=None)
    if worst is None or (worst.rel_l2_err or 0.0) <= HIDDEN_ERROR_FACTOR * rtol:
        return
    gross = (worst.rel_l2_err or 0.0) >= GROSS_REL_L2
    cmp.findings.append(Finding(
        rule="correctness.hidden-error", severity="reject" if gross else "warn",
        evidence=f"every element is within tolerance, but the output's relative L2 error reaches "
                 f"{worst.rel_l2_err:.3g} ({(worst.rel_l2_err or 0.0) / rtol:.0f}x rtol) on {describe(worst)}: "
                 "an error small against atol but large against the output's own scale (for example a wrong "
                 "normalisation of small outputs), which the elementwise test cannot see"))


def _short(t: TrialRecord) -> str:
    where = f"case '{t.case}', {t.distribution}, trial {t.trial}, {PHASE_WORDS.get(t.phase, t.phase)}"
    mm = t.mismatch
    if mm is None:
        return f"correctness.input-mutation: the candidate changed its inputs ({where})"
    if mm.reason == "values" or mm.reason == "nan":
        what = f"{mm.n_mismatch} of {mm.n_total} elements outside tolerance" + (" (NaN)" if mm.reason == "nan" else "")
    else:
        what = f"{mm.reason} differs: expected {mm.expected_desc}, got {mm.actual_desc}"
    return f"wrong output {mm.output} on {where}: {what}"
