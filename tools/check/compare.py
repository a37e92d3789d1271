"""Parent side of correctness: load each trial's packed outputs (reference worker vs candidate
worker), compare them, detect input mutation and nondeterministic problems, score the groups, and
summarise for the Coder. Everything here runs in kiln's own process."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kiln.tools.correctness import first_failure, relative_l2
from kiln.tools.inputs import DISTRIBUTIONS
from kiln.tools.integrity import degenerate
from kiln.tools.records import CaseSummary, DegenerateRecord, Finding, Mismatch, TrialRecord
from kiln.tools.tolerance import judge

DIST_WORDS = {name: d.words for name, d in DISTRIBUTIONS.items()}
PHASE_WORDS = {"first_call": "first call", "second_call": "second call on the same inputs"}
MAX_PACK_BYTES = 1 << 34  # a candidate's output file above 16 GiB is refused unread


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


def load_pack(path: str | Path) -> dict:
    import torch

    # weights_only: a worker wrote this file; never unpickle arbitrary objects from it
    if Path(path).stat().st_size > MAX_PACK_BYTES:
        raise ValueError(f"{Path(path).name} is larger than {MAX_PACK_BYTES >> 30} GiB")
    packed = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(packed, dict) or not isinstance(packed.get("meta"), list) or not isinstance(
            packed.get("tensors"), dict):
        raise ValueError("not a packed output")
    return packed


def describe(t: TrialRecord) -> str:
    return (f"case '{t.case}', {DIST_WORDS.get(t.distribution, t.distribution)}, trial {t.trial} "
            f"({PHASE_WORDS.get(t.phase, t.phase)})")


@dataclass
class TrialData:
    """One trial as both workers reported it (the parent's view; candidate fields untrusted)."""

    case: str
    dist: str
    trial: int
    ref: dict[str, Any]
    cand: dict[str, Any]
    packed: dict[str, Any]


class TrialComparer:
    """Compares trials as the session hands them over, and keeps the running verdict. `numerics`:
    the numerics rule decides (kiln.tools.tolerance); False when --atol/--rtol were given."""

    def __init__(self, atol: float, rtol: float, *, dtype: str = "fp32", numerics: bool = False) -> None:
        self.atol, self.rtol, self.dtype, self.numerics = atol, rtol, dtype, numerics
        self.cmp = Comparison(rule="numerics" if numerics else "atol_rtol")
        self.digests: dict[tuple[str, int], tuple[Any, dict]] = {}  # (dist, trial) -> (input_fp, digest)
        self.unit_mag: dict[str, dict[str, float]] = {}  # case -> output -> mean A on its x1 inputs (largest draw)

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
        if d.ref["input_fp"] != d.cand["input_fp"]:
            self.cmp.problem_error = ("get_inputs() gave different tensors under the same seed in two processes: it "
                                      "uses a random source kiln does not seed, so inputs cannot be reproduced")
            return []
        records = self._records(d)
        mutated = bool(d.cand.get("mutated") or d.packed.get("mutated"))
        if mutated and not d.ref.get("mutated"):
            _mutation(self.cmp, records)
        self.cmp.trials += records
        return records

    def _records(self, d: TrialData) -> list[TrialRecord]:
        expected = load_pack(d.ref["output"])
        self._digest(d, expected)
        raw_files = d.packed.get("files")
        files: dict[str, Any] = raw_files if isinstance(raw_files, dict) else {}
        try:  # the candidate's process wrote these: anything unreadable is its failure, not ours
            first = load_pack(files["first"])
            second = first if d.packed.get("after_same") or "second" not in files else load_pack(files["second"])
        except Exception as exc:  # noqa: BLE001
            msg = f"its output could not be read back as plain tensors ({type(exc).__name__}: {str(exc)[:200]})"
            return [TrialRecord(case=d.case, distribution=d.dist, trial=d.trial, phase=phase, passed=False,
                                mismatch=Mismatch(output="out", reason="type", message=msg), error=msg)
                    for phase in ("first_call", "second_call")]
        out: list[TrialRecord] = []
        times = (d.cand.get("call_s"), d.packed.get("call_s"))
        for (phase, actual), secs in zip((("first_call", first), ("second_call", second)), times, strict=True):
            if out and actual is first:  # bitwise-identical output: same verdict, no second comparison
                out.append(out[0].model_copy(update={"phase": phase, "candidate_s": _secs(secs)}, deep=True))
                continue
            # tolerance (issue 16): the numerics rule (or atol/rtol when given), and the fixed rule's verdict
            j = judge(expected, actual, dtype=self.dtype, atol=self.atol, rtol=self.rtol, numerics=self.numerics,
                      unit_mag=self.unit_mag.get(d.case))
            if d.dist == "x1":  # the unscaled inputs set the floor of the scaled trials' G term
                mags = self.unit_mag.setdefault(d.case, {})
                for name, v in j.mean_mag.items():
                    mags[name] = max(mags.get(name, 0.0), v)
            rel = relative_l2(expected, actual) if j.mismatch is None or j.legacy_passed else None
            out.append(TrialRecord(case=d.case, distribution=d.dist, trial=d.trial, phase=phase,
                                   passed=j.mismatch is None, mismatch=j.mismatch,
                                   input_mutated=bool(d.cand.get("mutated")), rel_l2_err=rel, candidate_s=_secs(secs),
                                   rule=j.rule, legacy_atol_rtol_passed=j.legacy_passed, outputs=j.outputs))
        return out

    def _digest(self, d: TrialData, expected: dict) -> None:
        """Keep a small digest of the problem's reference outputs for the degenerate check (the
        first trial of each distribution and a second x1 draw), before the session deletes them."""
        if d.case == "problem" and (d.trial == 0 or (d.dist, d.trial) == ("x1", 1)):
            self.digests[(d.dist, d.trial)] = (d.ref.get("input_fp"), degenerate.digest(expected))

    def _degenerate(self) -> DegenerateRecord | None:
        fps = {k: fp for k, (fp, _) in self.digests.items()}
        keys = degenerate.draws(list(DISTRIBUTIONS), fps)
        if not keys:
            return None
        return degenerate.assess_packs([(dist, self.digests[(dist, t)][1]) for dist, t in keys], dtype=self.dtype,
                                       atol=self.atol, rtol=self.rtol, numerics=self.numerics)

    def finish(self, *, complete: bool) -> Comparison:
        """`complete`: every planned trial ran (no early stop, no time-out)."""
        cmp = self.cmp
        bad = next((t for t in cmp.trials if not t.passed), None)
        cmp.passed = complete and bad is None and cmp.problem_error is None and bool(cmp.trials)
        cmp.legacy_passed = _legacy_verdict(cmp, complete)
        cmp.degenerate = self._degenerate()
        if cmp.passed:
            hidden_error(cmp, self.rtol)
        if bad is not None:
            if bad.mismatch is None:  # failed by mutation only
                cmp.first_failure = (f"ModelNew.forward wrote into its input tensors on {describe(bad)}. Inputs are "
                                     "read-only: allocate the output (and any scratch) separately.")
            else:
                cmp.first_failure = first_failure(describe(bad), bad.mismatch)
            cmp.short_reason = _short(bad)
        return cmp


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
