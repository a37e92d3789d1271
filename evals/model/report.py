"""The report of a whole-model run: `model.json` (the ModelReport record) and a self-contained HTML
page (no external assets): a stacked bar of where the time goes before and after patching, the
per-op table with status, speedups and CIs, the end-to-end figures, and what was skipped and why."""

from __future__ import annotations

import html
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from kiln.evals.model.records import ModelReport, OpOutcome

COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"]
OTHER = "#bab0ac"


def segments(r: ModelReport, top: int = 8) -> tuple[list[dict], list[dict]]:
    """(before, after) bar segments: the hottest groups, then the rest; `after` is each patched group's
    measured time (CPU runs measure none: after equals before)."""
    if r.profile is None or r.profile.total_us <= 0:
        return [], []
    total = r.profile.total_us
    status = {o.group: o for o in r.ops}
    singles = [g for g in r.profile.groups if g.kind != "fused"][:top]
    before, after, rest = [], [], total
    for i, g in enumerate(singles):
        o = status.get(g.id)
        seg = {"label": g.id, "frac": g.time_us / total, "color": COLORS[i % len(COLORS)]}
        before.append(seg)
        after.append(seg | {"frac": _after_us(g.time_us, o) / total, "patched": bool(o and o.status == "patched")})
        rest -= g.time_us
    before.append({"label": "other ops", "frac": max(rest, 0) / total, "color": OTHER})
    after.append({"label": "other ops", "frac": max(rest, 0) / total, "color": OTHER})
    return before, after


def _after_us(before_us: float, o: OpOutcome | None) -> float:
    """A group's time after patching: its kernels' measured time in the model when there is one, else
    the time divided by the kernel's speedup alone, else unchanged."""
    if o is None or o.status != "patched":
        return before_us
    if o.gpu_us:
        return o.gpu_us[1]
    return before_us / o.speedup.value if o.speedup else before_us


def bar_svg(segs: list[dict], width: int = 640, height: int = 26) -> str:
    x, parts = 0.0, []
    for s in segs:
        w = s["frac"] * width
        title = html.escape(f"{s['label']}: {100 * s['frac']:.1f}% of the original time")
        stroke = ' stroke="#000" stroke-width="2"' if s.get("patched") else ""
        parts.append(f'<rect x="{x:.1f}" y="0" width="{max(w, 0):.1f}" height="{height}" fill="{s["color"]}"'
                     f'{stroke}><title>{title}</title></rect>')
        x += w
    return f'<svg width="{width}" height="{height}" role="img">{"".join(parts)}</svg>'


def _fmt_speed(o: OpOutcome) -> str:
    sp = o.speedup
    return f"{sp.value:.2f}x [{sp.ci_low:.2f}, {sp.ci_high:.2f}]" if sp else "not measured"


def render_html(r: ModelReport) -> str:
    env = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"), undefined=StrictUndefined,
                      autoescape=select_autoescape(["html", "j2"]))
    before, after = segments(r)
    return env.get_template("model.html.j2").render(
        r=r, before=bar_svg(before), after=bar_svg(after), legend=before, speed=_fmt_speed,
        measured=bool(r.profile and r.profile.method == "torch.profiler"))


def write_report(folder: Path, r: ModelReport) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.json").write_text(r.model_dump_json(indent=2))
    (folder / "report.html").write_text(render_html(r))
