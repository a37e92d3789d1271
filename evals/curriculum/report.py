"""The curriculum report: `report.html` (self-contained) and `report.md` in the run directory.

Pass rate per family over rounds (table and plot), the frontier's movement (each family's weight
and how many of the round's API sets used it), module acceptance with the refusal reasons, reward
distributions per round, and throughput (modules per hour, samples checked per hour).
"""

from __future__ import annotations

from collections import Counter
from html import escape
from pathlib import Path

from kiln.evals.curriculum.card import family_rates
from kiln.evals.curriculum.frontier import Snapshot, Tally
from kiln.evals.curriculum.store import CurriculumStore, ModuleRow, SampleRow
from kiln.evals.plots import COLORS, PAD, H, W, _axes, _svg, bar_chart


def rate_plot(rates: dict[str, dict[int, tuple[int, int]]]) -> str:
    rounds = sorted({r for by in rates.values() for r in by})
    if not rounds:
        return '<p class="empty">No samples yet.</p>'
    span, plot_w, plot_h = max(1, rounds[-1]), W - PAD - 140, H - PAD - 10
    parts = []
    for i, (fam, by) in enumerate(sorted(rates.items())):
        color = COLORS[i % len(COLORS)]
        xy = " ".join(f"{PAD + r / span * plot_w:.1f},{H - PAD - by[r][0] / by[r][1] * plot_h:.1f}" for r in sorted(by))
        parts.append(f'<polyline points="{xy}" fill="none" stroke="{color}" stroke-width="2"/>')
        parts.append(f'<text x="{W - 130}" y="{20 + 14 * i}" font-size="11" fill="{color}">{escape(fam)}</text>')
    x_ticks = [(PAD + r / span * plot_w, str(r)) for r in rounds]
    y_ticks = [(H - PAD - plot_h * k / 4, f"{k / 4:.2f}") for k in range(5)]
    return _svg("pass_rate", _axes("round", "pass rate", x_ticks, y_ticks) + parts)


def frontier_rows(snaps: list[Snapshot], modules: list[ModuleRow]) -> list[list[str]]:
    """family, then per round: its share of the round's frontier weight (each family's E[p(1-p)]
    over their sum: a round's shares sum to 1) and the accepted modules that used it."""
    used = Counter((m.round, f) for m in modules if m.accepted for f in set(m.api_set.families))
    fams = sorted({f for s in snaps for f in s.families})
    totals = {s.round: sum(p.weight for p in s.families.values()) or 1.0 for s in snaps}
    return [[fam, *(f"{s.families[fam].weight / totals[s.round]:.3f} ({used[(s.round, fam)]})"
                    if fam in s.families else "—" for s in snaps)] for fam in fams]


def reward_hist(samples: list[SampleRow]) -> dict[str, int]:
    bins: Counter[str] = Counter()
    for s in samples:
        r = s.reward.reward if s.reward else 0.0
        bins["0 (failed)" if r == 0 else "1 (verified)" if r == 1 else f"{int(r * 2) / 2:.1f}-{int(r * 2) / 2 + .5:.1f}"] += 1
    return dict(sorted(bins.items()))


def throughput(store: CurriculumStore, modules: list[ModuleRow], samples: list[SampleRow]) -> dict[str, float]:
    times = [t for t in store.round_times().values()]
    wall = sum((end or start) - start for start, end in times)
    hours = wall / 3600 if wall > 0 else None
    return {"wall_s": round(wall, 1),
            "modules_per_hour": round(len(modules) / hours, 1) if hours else 0.0,
            "accepted_share": round(sum(m.accepted for m in modules) / len(modules), 3) if modules else 0.0,
            "samples_per_hour": round(len(samples) / hours, 1) if hours else 0.0}


def _rate_cell(passed: int, n: int) -> str:
    lo, hi = Tally(n=n, passed=passed).wilson()
    return f"{passed}/{n} ({lo:.2f}-{hi:.2f})"


def _table(head: list[str], rows: list[list[str]], html: bool) -> str:
    if html:
        th = "".join(f"<th>{escape(h)}</th>" for h in head)
        body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
        return f"<table><tr>{th}</tr>{body}</table>"
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
                      *("| " + " | ".join(r) + " |" for r in rows)])


def write_report(store: CurriculumStore, run_dir: Path) -> Path:
    modules, samples, snaps = store.modules(), store.samples(), store.snapshots()
    by_module: dict[str, list[SampleRow]] = {}
    for s in samples:
        by_module.setdefault(s.module, []).append(s)
    rates = family_rates(modules, by_module)
    rounds = sorted({s.round for s in snaps})
    rate_rows = [[f, *(_rate_cell(*by[r]) if r in by else "—" for r in rounds)] for f, by in sorted(rates.items())]
    head = ["family", *(f"round {r}" for r in rounds)]
    refusals = Counter((m.reason or "").split(":")[0] for m in modules if not m.accepted)
    tp = throughput(store, modules, samples)
    tp_line = (f"{len(modules)} modules written ({100 * tp['accepted_share']:.0f} % accepted), {len(samples)} samples "
               f"checked in {tp['wall_s']:.0f} s: {tp['modules_per_hour']:g} modules/h, {tp['samples_per_hour']:g} samples/h")
    per_round = {r: [s for s in samples if s.module.startswith(f"r{r:02d}_")] for r in rounds}
    md = ["# kiln curriculum report", "", tp_line, "", "## Pass rate per family (verified / samples, 95 % Wilson interval)", "",
          _table(head, rate_rows, False), "", "## Frontier: each family's share of the frontier weight at round start (a round sums to 1; accepted modules using it)",
          "", _table(head, frontier_rows(snaps, modules), False), "", "## Refused modules", "",
          *(f"- {k}: {v}" for k, v in refusals.items()), "", "## Rewards per round", "",
          *(f"- round {r}: {reward_hist(v)}" for r, v in per_round.items()), ""]
    (run_dir / "report.md").write_text("\n".join(md))
    html = ["<!doctype html><meta charset='utf-8'><title>kiln curriculum</title>",
            "<style>body{font:14px sans-serif;margin:2em}td,th{border:1px solid #ccc;padding:2px 8px}"
            "table{border-collapse:collapse}</style><h1>kiln curriculum report</h1>",
            f"<p>{escape(tp_line)}</p><h2>Pass rate per family</h2>", rate_plot(rates), _table(head, rate_rows, True),
            "<h2>Frontier: each family's share of the frontier weight at round start (a round sums to 1; accepted modules using it)</h2>",
            _table(head, frontier_rows(snaps, modules), True), "<h2>Refused modules</h2>",
            bar_chart(dict(refusals), "refusals"), "<h2>Rewards per round</h2>",
            *(f"<h3>round {r}</h3>" + bar_chart(reward_hist(v), f"rewards_{r}") for r, v in per_round.items())]
    (run_dir / "report.html").write_text("\n".join(html))
    return run_dir / "report.html"
