"""The human verdict of `kiln check` (a pure function of the CheckRecord, printed with rich)."""

from __future__ import annotations

from pathlib import Path

from kiln.tools.records import CheckRecord, CorrectnessRecord, TimingRecord

STATUS_STYLE = {"ok": "bold green", "incorrect": "bold red", "compile_error": "bold red", "crashed": "bold red",
                "timeout": "bold red", "rejected": "bold magenta", "unsupported": "bold yellow", "error": "bold red"}


def _correctness(c: CorrectnessRecord | None) -> list[str]:
    if c is None:
        return ["not run"]
    planned = f" of {c.n_planned} planned, stopped early" if c.n_planned > c.n_trials else ""
    head = (f"{'passed' if c.passed else 'FAILED'}: {c.n_passed}/{c.n_trials} trial calls "
            f"matched{planned} (atol {c.atol:g}, rtol {c.rtol:g})")
    lines = [head]
    if c.input_mutated:
        lines.append("the candidate modified its inputs")
    if c.first_failure:
        lines.append(c.first_failure)
    return lines


def _timing(t: TimingRecord | None) -> list[str]:
    if t is None or not t.measured:
        return [(t.reason if t and t.reason else "not measured")]
    lines = []
    if t.candidate:
        s = t.candidate
        lines.append(f"candidate {s.median_us:.2f} us median (95% CI {s.ci_low_us:.2f}-{s.ci_high_us:.2f}, "
                     f"n={s.n_samples})")
    for name, sp in t.speedups.items():
        lines.append(f"vs {name}: {sp.value:.2f}x (CI {sp.ci_low:.2f}-{sp.ci_high:.2f}) {sp.verdict}")
    for name, err in t.baseline_errors.items():
        lines.append(f"baseline {name} failed: {err}")
    m = t.memory
    if m.candidate_peak_bytes is not None and m.reference_peak_bytes is not None:
        lines.append(f"peak memory {m.candidate_peak_bytes / 2**20:.1f} MiB vs reference "
                     f"{m.reference_peak_bytes / 2**20:.1f} MiB" + (f" ({m.ratio:.2f}x)" if m.ratio else ""))
    if t.env and t.env.throttled:
        lines.append(f"WARNING: GPU throttled during measurement: {', '.join(t.env.throttle_reasons)}")
    if t.env and t.env.other_gpu_processes:
        lines.append(f"WARNING: {t.env.other_gpu_processes} other process(es) held the GPU during measurement")
    return lines


def _compile(r: CheckRecord) -> list[str]:
    c = r.compile
    if c is None:
        return ["not run"]
    took = f", import {c.compile_s:.2f} s" if c.compile_s is not None else ""
    took += f", first call {c.first_call_s:.2f} s" if c.first_call_s is not None else ""
    state = "ok" if c.ok else "FAILED"
    if c.lang == "unknown" and not c.backend:  # nothing loaded (no ModelNew, an import error): no kernel to name
        return [f"{state}: the candidate did not load{took}", *c.errors[:5]]
    return [f"{state} ({c.lang}, {c.backend or '?'}{', cached' if c.cached else ''}{took})", *c.errors[:5]]


def verdict_lines(r: CheckRecord) -> list[str]:
    """The verdict as plain lines (colour is added when printing)."""
    out = [f"kiln check {Path(r.problem).name} <- {Path(r.candidate).name}  ({r.device}, {r.dtype})",
           f"  status       {r.status.upper()}" + ("  (correct)" if r.correct and r.status != "ok" else "")]
    sections = {"compile": _compile(r), "correctness": _correctness(r.correctness), "timing": _timing(r.timing)}
    for name, lines in sections.items():
        out += [f"  {name:<12} {lines[0]}", *[f"  {'':<12} {line}" for line in lines[1:]]]
    integ = r.integrity
    for f in (integ.findings if integ else []):
        if f.severity != "info":
            out.append(f"  {'integrity':<12} {f.severity}: {f.rule}: {f.evidence}")
    for reason in r.reasons:
        out.append(f"  {'reason':<12} {reason}")
    if r.stages_s:
        out.append("  stages       " + " | ".join(f"{k} {v:.2f} s" for k, v in r.stages_s.items()))
    if r.status in ("crashed", "timeout") and r.stderr_tail.strip():
        out.append("  stderr (last lines):")
        out += [f"    {line}" for line in r.stderr_tail.strip().splitlines()[-8:]]
    return out


def print_verdict(r: CheckRecord) -> None:
    from rich.console import Console
    from rich.text import Text

    console = Console(highlight=False, soft_wrap=True)
    for line in verdict_lines(r):
        text = Text(line)  # plain text: candidate messages may contain [brackets]
        text.highlight_words([r.status.upper()], STATUS_STYLE.get(r.status, "bold"))
        text.highlight_words(["FAILED", "WARNING"], "bold red")
        text.highlight_words(["passed"], "green")
        console.print(text)
