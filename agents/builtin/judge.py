"""BuiltinJudge: fixed rules over the check record and the profile, no LLM.

A failing candidate gets one fix (repair) with the evidence from the record. A passing one is
stress-tested first, then optimized one knob at a time until it is at >= 90% of its roofline,
meets the target, has made no progress for `patience` iterations, or the search is exhausted.
"""

from __future__ import annotations

from kiln.agents import stoprules
from kiln.agents.base import JudgeDecision, JudgeInput, Usage
from kiln.agents.builtin import space
from kiln.agents.builtin.source import read_header
from kiln.tools.profile.records import ProfileReport
from kiln.tools.records import CheckRecord

SPILL_RULE = "registers.spills"  # the profiler's finding for local-memory (spill) traffic
KNOB_CYCLE = {
    "elementwise": [("block", "up"), ("num_warps", "up"), ("persistent", "up"), ("num_warps", "down")],
    "row": [("num_warps", "up"), ("tile", "up"), ("persistent", "up"), ("num_stages", "up"), ("num_warps", "down")],
    "matmul": [("tile", "up"), ("tile", "down"), ("prec", "up")],
    "gnorm": [("block", "up"), ("num_warps", "up"), ("block", "down"), ("num_warps", "down")],
    "conv": [("autotune", "up"), ("block_n", "down"), ("block_k", "up"), ("block_m", "down"), ("num_stages", "up"), ("prec", "up")],
    "dwconv": [("block", "up"), ("num_warps", "up"), ("block", "down")],
    "pool": [("block", "up"), ("num_warps", "up"), ("block", "down")],
    "attn": [("block_n", "up"), ("block_m", "up"), ("num_stages", "up"), ("prec", "up")],
    "chanstats": [("block", "up"), ("num_warps", "down")],
    "pipeline": [("preset", "up")],
    "scan": [("block", "up"), ("num_warps", "up"), ("block", "down"), ("num_warps", "down")],
    "argreduce": [("block", "up"), ("num_warps", "up"), ("block", "down"), ("num_warps", "down")],
    "crossent": [("chunk", "up"), ("block", "up"), ("num_warps", "up"), ("chunk", "down"), ("num_warps", "down")],
}


class BuiltinJudge:
    """The Judge role's offline policy (kiln.agents.base.Judge)."""

    def __init__(self, roofline_pct: float = 90.0, patience: int = 4) -> None:
        self.roofline_pct, self.patience = roofline_pct, patience

    def decide(self, inp: JudgeInput) -> JudgeDecision:
        c = inp.check
        if c.status == "unsupported":
            return _decision("correction", "the problem or candidate is unsupported", "stop", stop="unsupported",
                             evidence=c.reasons[:3])  # fmt: skip
        if c.status != "ok" or not c.correct:
            if inp.iters_without_progress >= 2 * self.patience:
                return _decision("correction", _diagnose(c)[0], "stop", stop="no progress: the kernel still fails")
            diag, evidence, plan = _diagnose(c)
            return _decision("correction", diag, "repair", plan=plan, evidence=evidence)
        return self._passing(inp)

    def _passing(self, inp: JudgeInput) -> JudgeDecision:
        c = inp.check
        stressed = inp.stress_passed or inp.stress_cases > 0
        if c.timing is None or not c.timing.measured:
            if not stressed:
                return _decision("optimization", "correct; not yet stress-tested", "stress",
                                 plan="Run stress cases at tile edges, odd sizes, batch 1 and extreme values.")  # fmt: skip
            why = c.timing.reason if c.timing and c.timing.reason else "no GPU"
            return _decision("optimization", "correct and its stress tests pass", "stop",
                             stop=f"correct; speed not measured ({why})")  # fmt: skip
        pct = roofline_pct(c, inp)
        evidence = _speed_evidence(c, pct)
        if not stressed:
            return _decision("optimization", "correct and timed; stress-test before optimizing", "stress", evidence=evidence)
        return self._optimize_or_stop(inp, pct, evidence)

    def _optimize_or_stop(self, inp: JudgeInput, pct: float | None, evidence: list[str]) -> JudgeDecision:
        c = inp.check
        head = read_header(inp.candidate_src)
        eager = c.timing.speedups.get("eager") if c.timing and c.timing.measured else None
        sp, low = (eager.value, eager.ci_low) if eager else (None, None)
        if stoprules.at_roofline(pct, stop_pct=self.roofline_pct):
            return _decision("optimization", f"at {pct:.0f}% of its roofline", "stop", stop="near roofline", evidence=evidence)
        if sp is not None and stoprules.target_met(sp, low, inp.target_speedup) and inp.target_speedup > 0:
            return _decision("optimization", f"{sp:.2f}x meets the target", "stop", stop="target met", evidence=evidence)
        if head is not None and space.exhausted(head.family, head.visited):
            return _decision("optimization", "configuration search exhausted", "stop", stop="search exhausted", evidence=evidence)
        if inp.iters_without_progress >= self.patience:
            return _decision("optimization", "no faster configuration lately", "stop", stop="no progress", evidence=evidence)
        fam = head.family if head is not None else "row"
        knob, direction = KNOB_CYCLE[fam][inp.iteration % len(KNOB_CYCLE[fam])]
        if inp.profile is not None and spills(inp.profile):
            knob, direction = ("block" if fam in ("elementwise", "gnorm") else "tile"), "down"
        bound = "compute (matmul tiles)" if fam == "matmul" else "memory bandwidth"
        plan = f"Try one configuration step: {knob} {direction}.\nknob: {knob} {direction}"
        return _decision("optimization", f"limited by {bound}", "optimize", bottleneck=bound, plan=plan, evidence=evidence)


def roofline_pct(c: CheckRecord, inp: JudgeInput) -> float | None:
    """% of the roofline: the physics record's floor/measured, else the profile's, else bytes/time."""
    phys = c.integrity.physics if c.integrity else None
    if phys is not None and phys.pct_of_floor is not None:
        return phys.pct_of_floor
    if (pct := profile_pct(inp.profile)) is not None:
        return pct
    if phys and phys.bytes_moved and c.timing and c.timing.candidate and inp.gpu.copy_gbps:
        gbps = phys.bytes_moved / (c.timing.candidate.median_us * 1e3)
        return 100.0 * gbps / inp.gpu.copy_gbps
    return None


def profile_pct(p: ProfileReport | None) -> float | None:
    """The main (slowest) kernel's % of its roofline, else its DRAM throughput as % of peak."""
    main = p.kernels[0] if p is not None and p.kernels else None
    if main is None:
        return None
    return main.roofline_pct if main.roofline_pct is not None else main.dram_pct


def spills(p: ProfileReport) -> bool:
    """A kernel of the profile moves local memory (register spills), by its bytes or the profiler's finding."""
    findings = [*p.findings, *(f for k in p.kernels for f in k.findings)]
    return any(k.spill_bytes for k in p.kernels) or any(f.rule == SPILL_RULE for f in findings)


def _speed_evidence(c: CheckRecord, pct: float | None) -> list[str]:
    ev = []
    if c.timing and c.timing.candidate:
        ev.append(f"median {c.timing.candidate.median_us:.1f} us")
    for name, s in (c.timing.speedups.items() if c.timing else []):
        ev.append(f"{s.value:.2f}x vs {name} ({s.verdict})")
    if pct is not None:
        ev.append(f"{pct:.0f}% of roofline")
    return ev


def _diagnose(c: CheckRecord) -> tuple[str, list[str], str]:
    if c.status == "compile_error" and c.compile is not None:
        errs = c.compile.errors[:3] or [c.compile.log_tail[-400:]]
        return "the candidate does not compile", errs, "Fix the compile error:\n" + "\n".join(errs)
    if c.status == "incorrect" and c.correctness is not None:
        first = c.correctness.first_failure or "outputs differ from the reference"
        ev = [f"{c.correctness.n_passed}/{c.correctness.n_trials} trials passed"]
        return "wrong results", ev, "Fix the mismatch:\n" + first
    if c.status == "rejected":
        finds = [f"{f.rule}: {f.evidence}" for f in (c.integrity.findings if c.integrity else []) if f.severity == "reject"]
        ev = finds[:3] or c.reasons[:3]
        return "rejected by the integrity checks", ev, "Remove what the integrity checks rejected:\n" + "\n".join(ev)
    tail = (c.stderr_tail or "")[-600:]
    return f"the candidate {c.status.replace('_', ' ')}", c.reasons[:3], f"Fix the {c.status}:\n{tail}".strip()


def _decision(mode: str, diagnosis: str, nxt: str, *, plan: str = "", stop: str | None = None,
              evidence: list[str] | None = None, bottleneck: str | None = None) -> JudgeDecision:  # fmt: skip
    return JudgeDecision(
        mode=mode,
        diagnosis=diagnosis,
        bottleneck=bottleneck,
        evidence=evidence or [],
        plan=plan[:1200],
        next=nxt,
        stop_reason=stop,
        usage=Usage(role="judge", model="builtin"),
    )
