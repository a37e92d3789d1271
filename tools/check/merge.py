"""Turn what a session gathered into the CheckRecord's sections: correctness (with the score and a
per-case summary), integrity (static findings, the candidate's runtime evidence, the reference's
facts, the parent's timing measurements). Candidate-written evidence is validated field by field;
anything that does not parse is the candidate's failure, never kiln's crash."""

from __future__ import annotations

from typing import Any

from kiln.tools.check.compare import Comparison
from kiln.tools.records import (
    CaseSummary,
    CorrectnessRecord,
    DegenerateRecord,
    Finding,
    IntegrityRecord,
    OpAccounting,
    PhysicsRecord,
    TimingIntegrity,
)


def correctness_record(cmp: Comparison, atol: float, rtol: float,
                       ref_replies: dict[str, dict[str, Any]] | None = None) -> CorrectnessRecord:
    n_passed = sum(t.passed for t in cmp.trials)
    return CorrectnessRecord(passed=cmp.passed, atol=atol, rtol=rtol, n_trials=len(cmp.trials), n_passed=n_passed,
                             trials=cmp.trials, first_failure=cmp.first_failure, input_mutated=cmp.input_mutated,
                             n_planned=cmp.n_planned, score=cmp.score, cases=_cases(cmp, ref_replies or {}),
                             not_attempted=cmp.not_attempted, rule=cmp.rule, legacy_atol_rtol_passed=cmp.legacy_passed,
                             dropped_distributions=cmp.dropped, n_planned_by_case=dict(cmp.n_planned_by_case))  # tolerance (issue 16): the last three


def _cases(cmp: Comparison, ref_replies: dict[str, dict[str, Any]]) -> dict[str, CaseSummary]:
    out: dict[str, CaseSummary] = {}
    for t in cmp.trials:
        c = out.setdefault(t.case, CaseSummary())
        if t.phase == "first_call":
            c.n_trials += 1
            c.n_passed += int(t.passed)
        if t.candidate_s is not None:
            c.candidate_s = round((c.candidate_s or 0.0) + t.candidate_s, 6)
    for tag, reply in ref_replies.items():
        case = tag.split(".", 1)[0]
        secs = reply.get("worker_s")
        if case in out and isinstance(secs, (int, float)):
            out[case].reference_s = round((out[case].reference_s or 0.0) + float(secs), 6)
    return out


def integrity_record(evidence: dict[str, Any], static: list[Finding], policy: str, cmp_findings: list[Finding], *,
                     static_mode: str = "allowlist") -> IntegrityRecord:
    """Static findings, correctness-side findings, and what the session gathered (`evidence`): the
    candidate's runtime evidence (judged here, never trusted as a verdict), the reference's facts
    and its degeneracy judgement across the trials' draws (issue 16), kiln's timing measurements."""
    x = evidence
    integ = IntegrityRecord(policy=policy, static=static_mode, findings=[*static, *cmp_findings])
    if "accounting" in x:  # the runtime stage ran: judge its evidence here, never trust its verdict
        integ.accounting = _validated(OpAccounting, x.get("accounting"))
        integ.findings += runtime_findings(integ.accounting, x.get("runtime_findings"), policy)
    facts = x.get("reference_facts") or {}
    if isinstance(facts.get("physics"), dict):
        integ.physics = PhysicsRecord.model_validate(facts["physics"])
    if isinstance(facts.get("degenerate"), dict):
        integ.degenerate = DegenerateRecord.model_validate(facts["degenerate"])
    draws = _validated(DegenerateRecord, x["degenerate_draws"]) if x.get("degenerate_draws") else None
    if draws is not None:  # tolerance (issue 16): across input draws, plus the reference's weight test
        reasons = draws.reasons + (integ.degenerate.reasons if integ.degenerate else [])
        integ.degenerate = DegenerateRecord(degenerate=bool(reasons), reasons=reasons)
    if isinstance(x.get("timing_integrity"), TimingIntegrity):
        integ.timing = x["timing_integrity"]
    return integ


def _validated(model: Any, data: Any) -> Any:
    try:
        return model.model_validate(data)
    except ValueError:
        return None


INVALID = Finding(rule="runtime.evidence-invalid", severity="reject",
                  evidence="the candidate's worker returned runtime evidence kiln cannot read")


def runtime_findings(acc: OpAccounting | None, raw: Any, policy: str) -> list[Finding]:
    """The accounting judged under the policy in this process, plus the worker's hygiene findings
    (evidence that can only count against the candidate). Unreadable evidence is a rejection."""
    from kiln.tools.integrity.runtime_rules import judge

    if acc is None:
        return [INVALID]
    try:
        theirs = [Finding.model_validate(f) for f in raw or []]
    except (TypeError, ValueError):
        return [INVALID, *judge(acc, policy)]
    mine = judge(acc, policy)
    rules = {f.rule for f in mine}
    return [_clipped(f) for f in mine + [f for f in theirs if f.rule not in rules]]


def _clipped(f: Finding) -> Finding:
    """A finding whose evidence came from the candidate's worker (its kernel names, its own
    findings), at most `messages.MAX_TEXT` characters of it."""
    from kiln.tools.check.messages import MAX_TEXT

    if len(f.evidence) <= MAX_TEXT:
        return f
    return f.model_copy(update={"evidence": f"{f.evidence[:MAX_TEXT]}... ({len(f.evidence) - MAX_TEXT} more characters)"})
