"""What the end-to-end check decided, written back onto each group's outcome; the coverage figure;
and how much of a time budget the end of a run needs."""

from __future__ import annotations

from kiln.evals.model.budget import Clock
from kiln.evals.model.records import E2ERecord, OpGroup, OpOutcome


def after_e2e(outcomes: list[OpOutcome], rec: E2ERecord, keep: list[str], groups: dict[str, OpGroup]) -> None:
    """Each tried group's in-model figures, and its final status with why."""
    for oc in outcomes:
        oc.in_model = rec.in_model.get(oc.group, oc.in_model)
        if oc.group in rec.group_gpu_us and oc.group in groups:
            oc.gpu_us = [round(groups[oc.group].time_us, 2), round(rec.group_gpu_us[oc.group], 2)]
        im = f"; in the model: {_fmt(oc.in_model)} of eager" if oc.in_model else ""
        if oc.group in keep:
            if oc.status != "patched":
                oc.reason = f"{oc.reason.split('; tried in the model')[0]}; patched: it wins in the model{im}"
                oc.status = "patched"
            else:
                oc.reason += im
        elif oc.status == "patched" or oc.trial:
            why = next((d.split(": ", 1)[1] for d in rec.dropped if d.startswith(oc.group + ":")),
                       "not kept by the end-to-end check")
            if oc.status == "patched":
                oc.status, oc.reason = "dropped", why
            else:
                oc.reason = f"{oc.reason.split('; tried in the model')[0]}; {why}"


def _fmt(sp) -> str:  # noqa: ANN001 - Speedup
    return f"{sp.value:.3f}x (CI {sp.ci_low:.3f}-{sp.ci_high:.3f})"


def coverage(groups: list[OpGroup], patched: list[str]) -> float:
    """Share of the original forward's time in calls a patched kernel runs: a single op group counts
    whole when patched, else by the fraction of its calls that patched fused pairs take."""
    fused = [g for g in groups if g.kind == "fused" and g.id in patched]
    total = 0.0
    for g in groups:
        if g.kind == "fused":
            continue
        key = g.sig.key()
        taken = sum(f.count for f in fused if f.sig.key() == key or (f.tail is not None and f.tail.key() == key))
        frac = 1.0 if g.id in patched else min(1.0, taken / g.count if g.count else 0.0)
        total += g.share * frac
    return total


def reserve_s(device: str, baseline: dict, n_groups: int, seeds: int, clock: Clock) -> float:
    """Seconds the end of a run needs: the end-to-end check (on a GPU: each group in the model, the
    never-slower loop, torch.compile of the patched model at the measured compile time), the
    bundle and the report."""
    if device == "cuda":
        compile_s = 0.0 if baseline.get("compile_error") else float(baseline.get("compile_s") or 30.0)
        return 1.3 * compile_s + 3.0 * n_groups + 2.0 * seeds + 15.0
    budget = (clock.end - clock.start) if clock.bounded else 0.0
    return 8.0 + 3.0 * seeds + 0.05 * budget
