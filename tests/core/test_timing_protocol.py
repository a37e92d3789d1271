"""The timing stage's protocol, exercised on the CPU with host clocks (`time_on_cpu`): the numbers
mean nothing here, the plumbing is what is tested. kiln's clock over laps, baselines in their own
worker, committed projections of every lap's outputs, a secret subset recomputed by the reference;
work moved out of a lap is charged to it. The GPU suite (`-m gpu`) measures for real."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln.tools.check import check
from kiln.tools.check.timing import N_AUDIT
from kiln.tools.integrity import verdict
from kiln.tools.records import CheckOptions, TimingIntegrity

DATA = Path(__file__).parent / "data"
PROBLEM = DATA / "add_problem.py"
TIMED = CheckOptions(device="cpu", trials=1, timeout_s=120, timing_timeout_s=4.0, time_on_cpu=True,
                     baselines=["eager", "eager_tf32"])
PATCHED = TIMED.model_copy(update={"run_rejected": True, "static": "denylist"})


@pytest.fixture(scope="module")
def honest():  # noqa: ANN201
    return check(PROBLEM, DATA / "add_triton.py", TIMED)


def test_an_honest_candidate_is_timed_by_laps_against_a_baseline_from_another_process(honest) -> None:
    t, ti = honest.timing, honest.integrity.timing
    assert honest.status == "ok" and t and t.measured and t.candidate, honest.reasons
    assert set(t.baselines) == set(t.speedups) == {"eager", "eager_tf32"} and not t.baseline_errors
    assert ti.method == "laps" and ti.n_laps == t.candidate.n_samples >= 7 and ti.slots >= 1
    assert ti.timed_outputs_checked == min(N_AUDIT, ti.n_laps * ti.slots) and ti.timed_outputs_failed == 0
    assert ti.audit_worst is not None and ti.audit_worst < 0.1  # as accurate as its checked trials, by far
    assert ti.base_commit_s is not None and ti.cand_commit_s is not None
    base_steps_us = (ti.base_refresh_s + ti.base_commit_s) / ti.slots * 1e6  # what goes uncharged, said aloud
    assert ti.uncharged_us_per_call >= 0.7 * base_steps_us > 0, (ti.uncharged_us_per_call, base_steps_us)


def test_a_call_counter_that_returns_stale_answers_while_timed_is_caught() -> None:
    rec = check(PROBLEM, DATA / "timing" / "counts_calls.py", TIMED)
    assert rec.correctness and rec.correctness.passed  # right whenever it is checked outside timing
    assert rec.status == "rejected" and any("timing.recheck-failed" in r for r in rec.reasons), rec.reasons
    assert rec.integrity.timing.timed_outputs_failed > 0


def test_forged_commitments_of_the_timed_outputs_are_rejected() -> None:
    rec = check(PROBLEM, DATA / "timing" / "forged_commit.py", PATCHED)
    assert rec.correctness and rec.correctness.passed, rec.reasons
    assert rec.status == "rejected" and any("timing.recheck-failed" in r for r in rec.reasons), rec.reasons
    assert rec.integrity.timing.timed_outputs_failed == rec.integrity.timing.timed_outputs_checked > 0


def test_lower_precision_only_while_timed_is_caught() -> None:
    """Exact fp32 on every checked call, fp16 arithmetic in the timed laps: the numerics rule would
    reject those outputs, and the audit holds them to the accuracy the checked trials showed (the
    default rtol of 1e-4 let fp16's rounding through). The honest kernel's audit stays far inside."""
    rec = check(PROBLEM, DATA / "timing" / "half_when_timed.py", TIMED)
    ti = rec.integrity.timing
    assert rec.correctness and rec.correctness.passed, rec.reasons
    assert rec.status == "rejected" and any("timing.recheck-failed" in r for r in rec.reasons), rec.reasons
    assert ti.timed_outputs_failed > ti.timed_outputs_checked // 2


def test_a_harness_that_foresees_the_laps_inputs_is_caught() -> None:
    """Each lap's inputs come from a key sent only with that lap's refresh: outputs computed ahead,
    in the untimed warm-up, from the ring's key and the lap's number answer other inputs."""
    rec = check(PROBLEM, DATA / "timing" / "foresees_inputs.py", PATCHED)
    ti = rec.integrity.timing
    assert rec.status == "rejected" and any("timing.recheck-failed" in r for r in rec.reasons), rec.reasons
    assert ti.timed_outputs_failed == ti.timed_outputs_checked > 0


@pytest.mark.serial
@pytest.mark.parametrize("fixture", ["lazy_lap.py", "lazy_lap_outlier.py", "mad_inflation.py"])
def test_work_moved_from_the_lap_into_the_commit_is_charged_to_the_lap(fixture) -> None:
    """The patched harness computes nothing in the lap and everything when asked to commit: kiln's
    clock charges that commit (beyond the baseline's) to the lap, so the lap-only figure never
    stands; the audit still passes (the outputs are right, only late). One 1 s sleep in one commit
    (`lazy_lap_outlier.py`) zeroed a charge made from means and their standard errors; a sleep on every
    other commit (`mad_inflation.py`) zeroed one whose slack came from the candidate's own spread. The
    charge now compares medians with the baseline's noise only."""
    rec = check(PROBLEM, DATA / "timing" / fixture, PATCHED)
    ti = rec.integrity.timing
    assert rec.timing and rec.timing.measured and ti.timed_outputs_failed == 0, rec.reasons
    assert ti.deferred_us_per_call > 0 and ti.cand_commit_s > ti.base_commit_s, ti
    lazy = rec.timing.candidate.median_us
    assert lazy > 2 * max(lazy - ti.deferred_us_per_call, 0.0)  # most of its time is the charge
    assert any(f.rule == "timing.deferred-work" for f in rec.integrity.findings)


def _ti(**kw) -> TimingIntegrity:
    return TimingIntegrity(**{"method": "laps", "timed_outputs_checked": 16, **kw})


def test_the_timing_rules() -> None:
    """An audit failure is a rejection; deferred work (charged anyway) is a warning above its floor."""
    rules = lambda ti, med=100.0: [(f.rule, f.severity) for f in verdict.judge_timing(ti, med)]  # noqa: E731
    assert rules(_ti()) == []
    assert rules(_ti(timed_outputs_failed=2, audit_why="lap 3, slot 1: ...")) == [("timing.recheck-failed", "reject")]
    assert rules(_ti(deferred_us_per_call=30.0)) == [("timing.deferred-work", "warn")]
    assert rules(_ti(deferred_us_per_call=3.0)) == []  # below the 5 us floor
    assert rules(_ti(deferred_us_per_call=8.0), 1000.0) == []  # below 10% of the time per call


def test_a_cached_baseline_that_would_charge_the_candidate_has_its_steps_timed_again(tmp_path: Path, monkeypatch) -> None:
    """The charge compares the candidate's refresh + commit with the baseline's identical steps; a
    cached baseline's steps were timed in another check, under other load. When the cached figures
    would charge the candidate, those steps are timed again in this check (in the reference worker,
    no process started) and the charge is judged against them; eager's cached laps stand, and the
    cache keeps its own figures."""
    import json

    from kiln.tools.check import caches

    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(caches, "gpu_identity", lambda index: "a test GPU")  # baselines cache off a GPU too
    opts = TIMED.model_copy(update={"baselines": ["eager"]})
    first = check(PROBLEM, DATA / "add_triton.py", opts)
    assert first.status == "ok" and first.evidence.baselines_cached == [], first.reasons
    (path,) = (tmp_path / "cache" / "baselines").glob("*.json")
    data = json.loads(path.read_text())
    assert min(data["overhead_s"]) > 0
    zero = {**data, "overhead_s": [0.0] * 8, "refresh_s": 0.0, "commit_s": 0.0}
    path.write_text(json.dumps(zero))
    from kiln.tools.check.session import Session

    started, start = [], Session._start
    monkeypatch.setattr(Session, "_start", lambda self, spec, *a, **k: started.append(spec.role) or start(self, spec, *a, **k))
    again = check(PROBLEM, DATA / "add_triton.py", opts)  # the cache now claims the steps cost nothing
    assert again.status == "ok" and again.timing and again.timing.measured, again.reasons
    ti = again.integrity.timing
    assert again.evidence.baselines_cached == ["eager"]  # eager's laps from the cache...
    assert ti.base_steps_now and ti.base_refresh_s > 0 and ti.base_commit_s > 0  # ...its steps timed now
    assert ti.uncharged_us_per_call > 0  # the allowance comes from the steps timed now, not the cache's zeros
    assert json.loads(path.read_text())["overhead_s"] == [0.0] * 8  # one check's conditions never rewrite the cache
    assert "baseline" not in started and "reference" in started, started  # no process started for it


def test_only_a_material_charge_against_the_cache_times_eager_again() -> None:
    """A cached baseline's steps that would charge the candidate less than the check's precision
    (timing_target_pct of a call) are kept, and the charge still applies; past it, eager is timed again."""
    from kiln.tools.check.timing import Laps, _charged_by_cache, charged_samples
    from kiln.tools.timing.laps import RingSpec

    ring = RingSpec(key=1, slots=100)
    laps = Laps("candidate")
    laps.lap_s = [0.010] * 8  # 100 us a call
    laps.refresh_s, laps.commit_s = [0.004] * 8, [0.004] * 8  # 8 ms of steps a lap
    cand = {"laps": laps}

    def plan(steps_s: float) -> dict:
        return {"cached": {"eager": {"overhead_s": [steps_s + 1e-6 * (i % 2) for i in range(8)]}}}

    small = plan(0.0078)  # the candidate's steps ~0.04 ms over the allowance: ~0.4 us a call, 0.4 %
    assert not _charged_by_cache(cand, small, ring, 1.0)
    assert 0 < charged_samples(cand, small["cached"]["eager"], ring.slots)[1] < 1.0  # applied all the same
    large = plan(0.004)  # ~4 ms a lap over: ~40 us a call, 40 %
    assert _charged_by_cache(cand, large, ring, 1.0)
    assert _charged_by_cache(cand, small, ring, 0.3)  # a tighter check re-times for less
    assert not _charged_by_cache(cand, {"cached": {}}, ring, 1.0)
