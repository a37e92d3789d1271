"""Run a check's session, assemble its record, and verify again after a speedup above 10x."""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

from kiln.tools.check import caches
from kiln.tools.check.budgets import EXTRA_ROUND_MIN_TRIALS, stage_timeouts
from kiln.tools.problem import CandidateInfo, ProblemInfo
from kiln.tools.records import CheckOptions, CheckRecord, ExtraRound, Finding


def new_workdir() -> Path:
    """A check's own dir in this kiln process's scratch root (kiln.tools.sandbox.scratch: in RAM when
    /dev/shm has room); the sandbox mounts the root for the workers."""
    import tempfile

    from kiln.tools.sandbox import scratch

    return Path(tempfile.mkdtemp(prefix="check-", dir=str(scratch.root())))


def fork_server(device: str, gpu_index: int, box: Any = None) -> Any:
    """The process-wide fork server for this device (None: workers start as fresh interpreters)."""
    from kiln.tools.check.servers import fork_server_for

    return fork_server_for(device, gpu_index, caches.root(), box)


def one_session(rec: CheckRecord, prob: ProblemInfo, cases: list[ProblemInfo], cand: CandidateInfo,
                options: CheckOptions, *, static: list[Finding], seed: int) -> tuple[CheckRecord, Any]:
    """One session's record (verdict not applied) and the physics floor's peaks it read."""
    t_imports = time.monotonic()  # kiln's own process never imports torch for a check (the workers do)
    from kiln.tools.check.session import Session
    from kiln.tools.sandbox.box import sandbox_for

    rec.stages_s["parent_imports"] = round(time.monotonic() - t_imports, 3)

    box = sandbox_for(options.isolation, options.bwrap)
    work = new_workdir()
    try:
        t_server = time.monotonic()
        zygote = fork_server(rec.device, options.gpu_index, box) if options.fork_server else None
        rec.stages_s["fork_server"] = round(time.monotonic() - t_server, 3)
        s = Session(rec, prob, cases, cand, options, static=static, secret=seed, work=work,
                    budgets=stage_timeouts(options), zygote=zygote, sandbox=box)
        out = s.run()
        from kiln.tools.check.merge import integrity_record

        cmp_findings = s.comparer.cmp.findings if s.comparer else []
        out.integrity = integrity_record(s.evidence, static, options.policy, cmp_findings, static_mode=options.static)
        if out.timing is None:
            out.timing = _not_timed(out, options)
            out.timing.reason = s.evidence.get("not_timed") or out.timing.reason
        out.evidence.n_weights_copied = s.evidence.get("n_weights_copied")
        out.evidence.baselines_cached = list(s.evidence.get("baselines_cached") or [])
        out.evidence.fork_server = _server_kind(zygote)
        out.env = out.timing.env if out.timing and out.timing.env else out.env
        return out, _peaks(s.evidence.get("peaks"))
    finally:
        t_clean = time.monotonic()
        from kiln.tools.files import remove_tree

        remove_tree(work)
        caches.trim_candidate_cache(cand.sha256)
        rec.stages_s["cleanup"] = round(time.monotonic() - t_clean, 3)  # the work dir and the compile cache


def _server_kind(zygote: Any) -> str:
    if zygote is None:
        return "none"
    from kiln.tools.sandbox.resident import Resident

    return "resident" if isinstance(zygote, Resident) else "process"


def _peaks(data: Any) -> Any:
    if data is None:
        return None
    from kiln.tools.peaks import Peaks

    return Peaks.model_validate(data)


def _not_timed(rec: CheckRecord, options: CheckOptions) -> Any:
    from kiln.tools.records import TimingRecord

    if rec.device == "cpu":
        reason = "not measured (no GPU)"
    elif not options.time:
        reason = "not measured (timing turned off)"
    elif not rec.correct:
        reason = "not measured (only correct candidates are timed)"
    else:
        reason = "not measured (the check stopped before timing)"
    return TimingRecord(measured=False, reason=reason)


def run_check(rec: CheckRecord, prob: ProblemInfo, cases: list[ProblemInfo], cand: CandidateInfo,
              options: CheckOptions, *, static: list[Finding], seed: int) -> tuple[CheckRecord, Any]:
    """The session's record and the peaks for the physics floor (the verdict comes after). The record
    keeps `seed`; the session's secret is that seed keyed by this machine's secret
    (`caches.machine_key`): the same seed draws the same inputs on this machine, and a candidate
    that knows or guesses the seed (a reward loop derived it from the problem and the completion)
    still cannot draw them."""
    from kiln.tools.check import caches
    from kiln.tools.draws import derive_seed

    rec.seed = seed
    out, peaks = one_session(rec.model_copy(deep=True), prob, cases, cand, options, static=static,
                             seed=derive_seed(caches.machine_key(), "check-seed", seed))
    return extra_round(out, prob, cases, cand, options, static=static), peaks


def extra_round(rec: CheckRecord, prob: ProblemInfo, cases: list[ProblemInfo], cand: CandidateInfo,
                options: CheckOptions, *, static: list[Finding]) -> CheckRecord:
    """After a speedup above 10x: verify again with more trials and a new secret seed."""
    from kiln.tools.integrity import verdict

    if rec.status != "ok" or not verdict.needs_extra_round(rec):
        return rec
    trials = max(EXTRA_ROUND_MIN_TRIALS, 2 * options.trials)
    again_opts = options.model_copy(update={"trials": trials, "time": False})
    blank = CheckRecord(problem=rec.problem, candidate=rec.candidate, device=rec.device, dtype=rec.dtype,
                        status="error")
    again, _ = one_session(blank, prob, cases, cand, again_opts, static=static, seed=secrets.randbits(63))
    assert rec.integrity is not None
    rec.integrity.extra_round = True
    rec.evidence.extra_round = ExtraRound(trials=trials, status=again.status,
                                          n_passed=again.correctness.n_passed if again.correctness else 0)
    if again.status != "ok":
        rec.status, rec.correct = again.status, False
        rec.reasons.append(f"extra verification round ({trials} trials, new seed) failed: "
                           + "; ".join(again.reasons[:2]))
    return rec


def cache_root(options: CheckOptions | None = None) -> Path:
    """$KILN_CACHE_DIR, else ~/.cache/kiln (COMPILE's rule, shared with `kiln doctor`)."""
    return caches.root()
