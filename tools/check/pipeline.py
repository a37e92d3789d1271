"""Build the worker jobs for one check, run the round(s), merge the records."""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import tempfile
from pathlib import Path

from kiln.tools.check.api import EXTRA_ROUND_MIN_TRIALS, SPAWN_SLACK_S, new_workdir, stage_timeouts
from kiln.tools.check.compare import RoundComparer
from kiln.tools.check.merge import merge, reference_failure
from kiln.tools.check.rounds import read_json, run_round, start_worker
from kiln.tools.check.worker import CaseSpec, JobSpec
from kiln.tools.correctness import tolerances
from kiln.tools.errors import KilnInputError
from kiln.tools.problem import CandidateInfo, ProblemInfo
from kiln.tools.records import CheckOptions, CheckRecord, Finding

KILN_REF_VERSION = 2  # bump when the cached reference-side integrity facts change meaning (2: degenerate
# holds weight independence only; the rest is judged in the parent across trials, issue 16)


def case_specs(prob: ProblemInfo, cases: list[ProblemInfo]) -> list[CaseSpec]:
    specs = [CaseSpec(name="problem", path=prob.path, model_path=prob.path)]
    for i, c in enumerate(cases):
        specs.append(CaseSpec(name=f"{c.name}" if c.name != "problem" else f"case{i}", path=c.path,
                              model_path=c.path if c.has_model else prob.path))
    return specs


def cache_root(options: CheckOptions) -> Path:
    """$KILN_CACHE_DIR, else ~/.cache/kiln (COMPILE's rule, shared with `kiln doctor`)."""
    from kiln.tools.compile import default_cache_root

    return default_cache_root()


def job_specs(work: Path, rec: CheckRecord, cases: list[CaseSpec], cand: CandidateInfo, options: CheckOptions,
              *, seed: int, trials: int, time: bool) -> tuple[JobSpec, JobSpec]:
    atol, rtol = tolerances(options.dtype, options.atol, options.rtol)
    timing_budget = stage_timeouts(options)["timing"]
    common = dict(parent_pid=os.getpid(), cases=cases, dtype=options.dtype, device=rec.device, secret=seed, trials=trials,
                  cache_root=str(cache_root(options)), policy=options.policy, atol=atol, rtol=rtol, time=time,
                  numerics=options.atol is None and options.rtol is None,  # tolerance (issue 16)
                  baselines=list(options.baselines), timing_max_s=0.6 * timing_budget,
                  speedup_threshold=options.speedup_threshold, gpu_index=options.gpu_index,
                  profile_dir=os.environ.get("KILN_PROFILE_WORKERS") or None)
    key = hashlib.sha256("".join(Path(c.path).read_text() for c in cases).encode()).hexdigest()[:24]
    ref_cache = cache_root(options) / "reference" / f"{key}.{options.dtype}.{rec.device}.{KILN_REF_VERSION}.json"
    # the reference's outputs live under a random name in a directory its owner may not list (mode
    # 0311), so candidate code can't find them next to its own working directory (root ignores modes:
    # there, as against any determined reader, the static scan's file-access rules are the defence)
    ref_dir = Path(tempfile.mkdtemp(prefix="r-", dir=work))
    (work / "cand").mkdir()
    os.chmod(work, 0o311)
    ref = JobSpec(role="reference", work_dir=str(ref_dir), reference_cache=str(ref_cache),
                  **common)
    cnd = JobSpec(role="candidate", candidate=cand.path, work_dir=str(work / "cand"), **common)
    return ref, cnd


def one_round(rec: CheckRecord, cases: list[CaseSpec], cand: CandidateInfo, options: CheckOptions, *,
              static: list[Finding], seed: int, trials: int, time: bool) -> CheckRecord:
    work = new_workdir()
    try:
        ref_spec, cand_spec = job_specs(work, rec, cases, cand, options, seed=seed, trials=trials, time=time)
        rnd = run_round(ref_spec, cand_spec, cache_root=cache_root(options), cand_key=cand.sha256[:16],
                        stage_timeouts=stage_timeouts(options), timeout_s=options.timeout_s + SPAWN_SLACK_S,
                        comparer=RoundComparer(ref_spec, cand_spec), use_fork_server=options.fork_server)
        reference_failure(rnd, rec.problem, options.timeout_s)
        try:
            out = merge(rec.model_copy(deep=True), rnd, static=static, policy=options.policy,
                        atol=ref_spec.atol, rtol=ref_spec.rtol, timing_wanted=time)
        except KilnInputError:
            raise
        except Exception as exc:  # noqa: BLE001 - the candidate's process wrote these files: never raise
            out = rec.model_copy(deep=True)
            out.status = "error"
            out.reasons.append(f"the candidate's worker left results kiln cannot read ({type(exc).__name__}: "
                               f"{str(exc)[:300]})")
        peaks = trusted_peaks(work, rnd.ref_data, out, options)
        if peaks:
            out.extra["peaks"] = peaks
        return out
    finally:
        with contextlib.suppress(OSError):
            os.chmod(work, 0o700)
        shutil.rmtree(work, ignore_errors=True)


PEAKS_TIMEOUT_S = 180.0


def trusted_peaks(work: Path, ref_data: dict, rec: CheckRecord, options: CheckOptions) -> dict | None:
    """The physics floor's peaks: from the reference worker (a trusted process reading the cache);
    when the cache lacks them and the candidate was timed, measured now by a `peaks` worker, with
    both workers gone and the GPU idle. Never from the candidate's own result file."""
    if ref_data.get("peaks"):
        return ref_data["peaks"]
    if not ref_data.get("peaks_missing") or rec.timing is None or not rec.timing.measured:
        return None
    spec = JobSpec(role="peaks", cases=[], dtype=options.dtype, device=rec.device, secret=0,
                   work_dir=str(work / "peaks"), cache_root=str(cache_root(options)), time=False,
                   gpu_index=options.gpu_index, parent_pid=os.getpid())
    proc = start_worker(spec, cache_root(options), "peaks", PEAKS_TIMEOUT_S)
    proc.wait()
    return read_json(spec.result_path).get("peaks")


def run_check(rec: CheckRecord, prob: ProblemInfo, cases: list[ProblemInfo], cand: CandidateInfo,
              options: CheckOptions, *, static: list[Finding], seed: int) -> CheckRecord:
    specs = case_specs(prob, cases)
    rec.seed = seed
    out = one_round(rec, specs, cand, options, static=static, seed=seed, trials=options.trials, time=options.time)
    return extra_round(out, specs, cand, options, static=static)


def extra_round(rec: CheckRecord, specs: list[CaseSpec], cand: CandidateInfo, options: CheckOptions, *,
                static: list[Finding]) -> CheckRecord:
    """After a speedup above 10x: verify again with more trials and a new secret seed."""
    from kiln.tools.integrity import verdict

    if rec.status != "ok" or not verdict.needs_extra_round(rec):
        return rec
    trials = max(EXTRA_ROUND_MIN_TRIALS, 2 * options.trials)
    again = one_round(rec, specs, cand, options, static=static, seed=secrets.randbits(63), trials=trials, time=False)
    assert rec.integrity is not None
    rec.integrity.extra_round = True
    rec.extra["extra_round"] = {"trials": trials, "status": again.status,
                                "n_passed": again.correctness.n_passed if again.correctness else 0}
    if again.status != "ok":
        rec.status, rec.correct = again.status, False
        rec.reasons.append(f"extra verification round ({trials} trials, new seed) failed: "
                           + "; ".join(again.reasons[:2]))
    return rec
