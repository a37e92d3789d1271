"""The profile node: a profile of each correct frontier candidate for the Judge, through
`kiln.tools.profile` when on a GPU and available; otherwise a recorded reason and no profile."""

from __future__ import annotations

import time
from pathlib import Path

from langgraph.runtime import Runtime

from kiln.graphs import rundir
from kiln.graphs.common import emit, timed
from kiln.graphs.context import ProfileFn, RunContext
from kiln.graphs.state import ProfileNote, RunState, TimeEntry
from kiln.tools.profile.records import ProfileReport
from kiln.tools.profile.render import render_digest


def make_profiler(device: str, isolation: str = "best-effort",
                  bwrap: str | None = None) -> tuple[ProfileFn | None, str | None]:
    """The real profiler when it can run here, else (None, why not). The candidate's profiled
    program is confined at the run's own isolation level, like its checks."""
    if device != "cuda":
        return None, "CPU run: no GPU to profile"
    try:
        from kiln.tools.profile import profile_candidate
    except ImportError as err:
        return None, f"profiler not available ({err})"

    def profile(problem: Path, candidate: Path) -> tuple[ProfileReport | None, str | None]:
        try:
            report = profile_candidate(problem, candidate, level="quick", device="cuda", isolation=isolation,
                                       bwrap=bwrap)
        except Exception as err:  # noqa: BLE001 - a failed profile is a recorded reason, not a crash
            return None, f"profiler failed: {type(err).__name__}: {err}"
        return report, None

    return profile, None


def _profile_one(ctx: RunContext, cid: str, source_path: str) -> ProfileNote:
    if ctx.profiler is None:
        return ProfileNote(candidate=cid, skipped=str(ctx.extra.get("profile_skipped", "no profiler")))
    emit(stage="profile", candidate=cid)
    t0 = time.monotonic()
    report, skipped = ctx.profiler(ctx.problem, ctx.run_dir / source_path)
    secs = time.monotonic() - t0
    if report is None:
        return ProfileNote(candidate=cid, skipped=skipped or "no profile", seconds=secs)
    rel, digest_rel = rundir.RunDir.candidate_rel(cid, "profile.json"), rundir.RunDir.candidate_rel(cid, "profile.txt")
    rundir.write_json(ctx.run_dir, rel, report)
    rundir.write(ctx.run_dir, digest_rel, render_digest(report))  # for people; the Judge reads the report
    return ProfileNote(candidate=cid, report_path=rel, digest_path=digest_rel, seconds=secs)


@timed("profile")
def profile(state: RunState, runtime: Runtime[RunContext]) -> dict:
    ctx = runtime.context
    cands, done = state.get("candidates", {}), state.get("profiles", {})
    notes: dict[str, ProfileNote] = {}
    for cid in state.get("frontier", []):
        cand = cands.get(cid)
        if cand is None or not cand.correct or cid in done or cand.source_path is None:
            continue
        notes[cid] = _profile_one(ctx, cid, cand.source_path)
        rundir.event(ctx.run_dir, "profile", id=cid, skipped=notes[cid].skipped)
    it = state.get("iteration", 0)
    times = [TimeEntry(iteration=it, kind="profile", seconds=n.seconds) for n in notes.values() if n.seconds]
    return {"profiles": notes, "times": times}
