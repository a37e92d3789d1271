"""Compare two batch runs on the problems they have in common."""

from __future__ import annotations

import math

from pydantic import BaseModel

from kiln.evals.batch.report import RunData
from kiln.tools.records import JSON_SAFE


class CompareRow(BaseModel):
    model_config = JSON_SAFE

    problem: str
    status_a: str
    status_b: str
    speedup_a: float | None
    speedup_b: float | None
    change: str  # "fixed", "broke", "faster", "slower", "same"


def _change(a_ok: bool, b_ok: bool, sa: float | None, sb: float | None) -> str:
    if a_ok != b_ok:
        return "fixed" if b_ok else "broke"
    if sa and sb and abs(math.log(sb / sa)) > math.log(1.05):
        return "faster" if sb > sa else "slower"
    return "same"


def _fast_1(rows: dict, common: list[str]) -> float | None:
    """Correct and faster than eager, over the common problems; None when no speed was measured."""
    if not any(rows[p].speedup_eager is not None for p in common):
        return None
    return sum(1 for p in common if rows[p].correct and (rows[p].speedup_eager or 0) > 1) / (len(common) or 1)


def compare(a: RunData, b: RunData) -> tuple[list[CompareRow], dict]:
    rows_a = {r.problem: r for r in a.rows}
    rows_b = {r.problem: r for r in b.rows}
    common = sorted(set(rows_a) & set(rows_b))
    rows = [CompareRow(problem=p, status_a=rows_a[p].status, status_b=rows_b[p].status,
                       speedup_a=rows_a[p].speedup_eager, speedup_b=rows_b[p].speedup_eager,
                       change=_change(rows_a[p].correct, rows_b[p].correct, rows_a[p].speedup_eager,
                                      rows_b[p].speedup_eager))
            for p in common]
    n = len(common)
    summary = {
        "common_problems": n,
        "only_a": sorted(set(rows_a) - set(rows_b)),
        "only_b": sorted(set(rows_b) - set(rows_a)),
        "correct_a": sum(rows_a[p].correct for p in common) / n if n else None,  # None: nothing to compare
        "correct_b": sum(rows_b[p].correct for p in common) / n if n else None,
        "fast_1_a": _fast_1(rows_a, common),
        "fast_1_b": _fast_1(rows_b, common),
        "changes": {c: sum(1 for r in rows if r.change == c) for c in ("fixed", "broke", "faster", "slower", "same")},
    }
    return rows, summary


def nothing_in_common(a: RunData, b: RunData, summary: dict) -> str:
    """The one line a comparison with no common problem gets instead of figures."""
    def some(names: list[str]) -> str:
        return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "") or "none"

    return (f"nothing to compare: {a.run_dir} and {b.run_dir} have no problem in common "
            f"(A: {some(summary['only_a'])}; B: {some(summary['only_b'])})")


def render_markdown(a: RunData, b: RunData, rows: list[CompareRow], summary: dict) -> str:
    def f(v: float | None) -> str:
        return "—" if v is None else f"{v:.2f}x"

    def frac(v: float | None) -> str:
        return "not measured" if v is None else f"{v:.2f}"

    changes = ", ".join(f"{n} {kind}" for kind, n in summary["changes"].items())
    if not summary["common_problems"]:
        return f"# kiln compare: {a.run_dir.name} (A) vs {b.run_dir.name} (B)\n\n{nothing_in_common(a, b, summary)}\n"

    lines = [f"# kiln compare: {a.run_dir.name} (A) vs {b.run_dir.name} (B)", "",
             f"- common problems: {summary['common_problems']}",
             f"- correct: A {summary['correct_a']:.1%}, B {summary['correct_b']:.1%}",
             f"- fast_1 vs eager: A {frac(summary['fast_1_a'])}, B {frac(summary['fast_1_b'])}",
             f"- changes: {changes}", "",
             "| problem | A | B | speedup A | speedup B | change |", "|---|---|---|---|---|---|"]
    lines += [f"| {r.problem} | {r.status_a} | {r.status_b} | {f(r.speedup_a)} | {f(r.speedup_b)} | {r.change} |"
              for r in rows]
    return "\n".join(lines) + "\n"
