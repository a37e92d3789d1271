"""Turn one round's worker results into the CheckRecord sections: compile, correctness, timing,
integrity, stage times, and the status with plain-words reasons."""

from __future__ import annotations

from typing import Any

from kiln.tools.check.compare import Comparison, compare_round
from kiln.tools.check.rounds import Round
from kiln.tools.errors import KilnInputError
from kiln.tools.records import (
    CheckRecord,
    CompileRecord,
    CorrectnessRecord,
    DegenerateRecord,
    EnvRecord,
    Finding,
    IntegrityRecord,
    OpAccounting,
    PhysicsRecord,
    TimingIntegrity,
    TimingRecord,
)

STDERR_KEEP = 2000


def reference_failure(rnd: Round, problem: str, timeout_s: float) -> None:
    """A reference that can't run means a broken problem: one KilnInputError line."""
    err = rnd.ref_data.get("error")
    if err:
        if err["kind"] == "input":
            raise KilnInputError(f"{problem}: {err['message']}")
        raise KilnInputError(f"{problem}: the reference Model failed in {err['where']}: {err['message']}")
    if rnd.ref.timed_out:
        raise KilnInputError(f"{problem}: the reference took longer than {timeout_s:.0f} s ({rnd.ref.detail})")
    if rnd.ref.returncode != 0 or not rnd.ref_data.get("done"):
        last = (rnd.ref.stderr_tail.strip().splitlines() or ["no output"])[-1]
        raise KilnInputError(f"{problem}: the reference worker died ({_how(rnd.ref.returncode, rnd.ref.signal_name)}):"
                             f" {last}")


def _how(rc: int | None, sig: str | None) -> str:
    if sig:
        return f"killed by {sig}"
    return f"exit code {rc}"


def _where(rnd: Round) -> str:
    stage = rnd.cand.stage or "start-up"
    stage = "compile" if stage == "start" else stage
    return f"{stage} ({rnd.cand.detail})" if rnd.cand.detail else stage


def candidate_outcome(rnd: Round) -> tuple[str, list[str]] | None:
    """crashed / timeout / compile_error from the candidate worker; None when it ran to the end."""
    data, proc = rnd.cand_data, rnd.cand
    comp = data.get("compile")
    if comp is not None and not comp.get("ok"):
        return "compile_error", comp.get("errors", [])[:3] or ["the candidate failed to compile"]
    err = data.get("error")
    if err:
        return "crashed", [f"the candidate raised {err['message']} during {err['where']}"]
    if proc.timed_out:
        return "timeout", [f"timed out in stage {_where(rnd)}: {proc.timeout_reason}"]
    if proc.returncode != 0:
        hint = " (illegal memory access or segfault?)" if proc.signal_name in ("SIGSEGV", "SIGBUS") else ""
        return "crashed", [f"the candidate worker was {_how(proc.returncode, proc.signal_name)}{hint} "
                           f"in stage {_where(rnd)}"]
    failed = not (rnd.comparison and rnd.comparison.passed)
    stopped_by_parent = (data.get("correctness_done") or data.get("stopped_by_parent")) and failed
    if not data.get("done") and not stopped_by_parent:
        return "crashed", [f"the candidate worker exited early (exit code 0) in stage {_where(rnd)}: "
                               "os._exit or sys.exit in the candidate?"]
    return None


def _last_error_line(rnd: Round) -> str:
    tb = (rnd.cand_data.get("error") or {}).get("traceback", "")
    frames = [ln.strip() for ln in tb.splitlines() if ln.strip().startswith("File ")]
    return f" Innermost frame: {frames[-1]}" if frames else ""


def correctness_record(cmp: Comparison, atol: float, rtol: float) -> CorrectnessRecord:
    n_passed = sum(t.passed for t in cmp.trials)
    return CorrectnessRecord(passed=cmp.passed, atol=atol, rtol=rtol, n_trials=len(cmp.trials), n_passed=n_passed,
                             trials=cmp.trials, first_failure=cmp.first_failure, input_mutated=cmp.input_mutated,
                             n_planned=cmp.n_planned, rule=cmp.rule, legacy_atol_rtol_passed=cmp.legacy_passed,
                             dropped_distributions=cmp.dropped)  # tolerance (issue 16): the last three


def stage_times(rnd: Round) -> dict[str, float]:
    stages: dict[str, list[Any]] = rnd.cand_data.get("stages", {})
    out: dict[str, float] = {}
    first = min((v[0] for v in stages.values() if v and v[0]), default=None)
    if first is not None:
        out["spawn"] = round(first - rnd.cand_started_wall, 3)
    for name in ("compile", "correctness", "integrity", "timing"):
        t0, t1 = (stages.get(name) or [None, None])[:2]
        if t0 and t1:
            out[name] = round(t1 - t0, 3)
    out["reference"] = round(rnd.ref.wall_s, 3)
    ref_integrity = (rnd.ref_data.get("stages", {}).get("integrity") or [None, None])[:2]
    if ref_integrity[0] and ref_integrity[1]:
        out["reference_integrity"] = round(ref_integrity[1] - ref_integrity[0], 3)
    return out


def integrity_record(rnd: Round, policy: str, static: list[Finding], cmp: Comparison | None) -> IntegrityRecord:
    cd, rd = rnd.cand_data, rnd.ref_data
    integ = IntegrityRecord(policy=policy, findings=list(static))
    integ.findings += [Finding.model_validate(f) for f in cd.get("findings", [])]
    integ.findings += cmp.findings if cmp else []
    if cd.get("accounting"):
        integ.accounting = OpAccounting.model_validate(cd["accounting"])
    if cd.get("timing_integrity"):
        integ.timing = TimingIntegrity.model_validate(cd["timing_integrity"])
    if rd.get("physics"):
        integ.physics = PhysicsRecord.model_validate(rd["physics"])
    if rd.get("degenerate"):
        integ.degenerate = DegenerateRecord.model_validate(rd["degenerate"])
    if cmp is not None and cmp.degenerate is not None:  # tolerance (issue 16): judged across input draws
        reasons = cmp.degenerate.reasons + (integ.degenerate.reasons if integ.degenerate else [])
        integ.degenerate = DegenerateRecord(degenerate=bool(reasons), reasons=reasons)
    return integ


def timing_record(rnd: Round, device: str, correct: bool, timing_wanted: bool) -> TimingRecord:
    if rnd.cand_data.get("timing"):
        return TimingRecord.model_validate(rnd.cand_data["timing"])
    if device == "cpu":
        reason = "not measured (no GPU)"
    elif not timing_wanted:
        reason = "not measured (timing turned off)"
    elif not correct:
        reason = "not measured (only correct candidates are timed)"
    else:
        reason = "not measured (the worker stopped before timing)"
    return TimingRecord(measured=False, reason=reason)


def merge(rec: CheckRecord, rnd: Round, *, static: list[Finding], policy: str, atol: float, rtol: float,
          timing_wanted: bool) -> CheckRecord:
    """Fill `rec` (problem, candidate, device, dtype set) from a finished round."""
    cmp = rnd.comparison
    if cmp is None and rnd.cand_data.get("trials"):  # partial trials before a crash still get compared
        cmp = compare_round(rnd.ref_spec, rnd.ref_data, rnd.cand_spec, rnd.cand_data)
    if cmp is not None and cmp.problem_error:
        raise KilnInputError(f"{rec.problem}: {cmp.problem_error}")
    if rnd.cand_data.get("compile"):
        rec.compile = CompileRecord.model_validate(rnd.cand_data["compile"])
    rec.correctness = correctness_record(cmp, atol, rtol) if cmp else None
    rec.correct = bool(cmp and cmp.passed)
    outcome = candidate_outcome(rnd)
    if outcome:
        rec.status, rec.reasons = outcome[0], rec.reasons + outcome[1]
        if rec.correctness is not None and not rec.correctness.first_failure:
            rec.correctness.first_failure = f"{outcome[1][0]}." + _last_error_line(rnd)
    elif not rec.correct:
        rec.status = "incorrect"
        rec.reasons.append(cmp.short_reason if cmp and cmp.short_reason else "correctness trials incomplete")
    else:
        rec.status = "ok"
    rec.timing = timing_record(rnd, rec.device, rec.correct, timing_wanted)
    rec.integrity = integrity_record(rnd, policy, static, cmp)
    rec.env = EnvRecord.model_validate(rnd.cand_data["env"]) if rnd.cand_data.get("env") else rec.timing.env
    rec.stages_s = stage_times(rnd)
    if rec.status != "ok":
        err = rnd.cand_data.get("error") or {}
        tb = f"{err['traceback']}\n" if err.get("traceback") else ""  # the candidate's frames, innermost last
        rec.stderr_tail = (tb + rnd.cand.stderr_tail)[-STDERR_KEEP:]
    return rec
