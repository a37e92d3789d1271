"""Tiny inline-SVG plots for the self-contained HTML report (no network, no JS libraries)."""

from __future__ import annotations

import math
from html import escape

W, H, PAD = 560, 260, 44
COLORS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c")


def _axes(x_label: str, y_label: str, x_ticks: list[tuple[float, str]], y_ticks: list[tuple[float, str]]) -> list[str]:
    parts = [f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - 10}" y2="{H - PAD}" stroke="#333"/>',
             f'<line x1="{PAD}" y1="10" x2="{PAD}" y2="{H - PAD}" stroke="#333"/>']
    for x, label in x_ticks:
        parts.append(f'<text x="{x:.1f}" y="{H - PAD + 16}" font-size="11" text-anchor="middle">{escape(label)}</text>')
    for y, label in y_ticks:
        parts.append(f'<text x="{PAD - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{escape(label)}</text>')
        parts.append(f'<line x1="{PAD}" y1="{y:.1f}" x2="{W - 10}" y2="{y:.1f}" stroke="#eee"/>')
    parts.append(f'<text x="{(W + PAD) / 2}" y="{H - 6}" font-size="12" text-anchor="middle">{escape(x_label)}</text>')
    parts.append(f'<text x="12" y="{H / 2}" font-size="12" text-anchor="middle" '
                 f'transform="rotate(-90 12 {H / 2})">{escape(y_label)}</text>')
    return parts


def _svg(kind: str, parts: list[str]) -> str:
    body = "".join(parts)
    return f'<svg class="plot" data-plot="{kind}" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img">{body}</svg>'


def speedup_histogram(speedups: list[float], title: str = "speedup") -> str:
    """Histogram of speedups on a log2 axis; the 1x line marks 'as fast as the baseline'."""
    if not speedups:
        return '<p class="empty">No measured speedups (run without a GPU, or no correct kernel).</p>'
    logs = [math.log2(max(s, 1e-3)) for s in speedups]
    lo, hi = math.floor(min(logs + [-1.0])), math.ceil(max(logs + [1.0]))
    nbins = max(1, (hi - lo) * 2)
    counts = [0] * nbins
    for v in logs:
        counts[min(nbins - 1, int((v - lo) / (hi - lo) * nbins))] += 1
    top = max(counts)
    plot_w, plot_h = W - PAD - 10, H - PAD - 10
    bw = plot_w / nbins
    parts = []
    for i, c in enumerate(counts):
        h = plot_h * c / top
        parts.append(f'<rect class="bar" x="{PAD + i * bw + 1:.1f}" y="{H - PAD - h:.1f}" width="{bw - 2:.1f}" '
                     f'height="{h:.1f}" fill="{COLORS[0]}"><title>{c}</title></rect>')
    x1 = PAD + (0 - lo) / (hi - lo) * plot_w
    parts.append(f'<line x1="{x1:.1f}" y1="10" x2="{x1:.1f}" y2="{H - PAD}" stroke="#dc2626" stroke-dasharray="4"/>')
    x_ticks = [(PAD + (e - lo) / (hi - lo) * plot_w, f"{2.0 ** e:g}x") for e in range(lo, hi + 1)]
    steps = sorted({round(top * k / 4) for k in range(5)})
    y_ticks = [(H - PAD - plot_h * c / top, str(c)) for c in steps]
    return _svg("histogram", _axes(f"{title} (log scale)", "problems", x_ticks, y_ticks) + parts)


def fast_p_curves(curves: dict[str, list[tuple[float, float]]]) -> str:
    """fast_p against p, one line per baseline."""
    points = [pt for pts in curves.values() for pt in pts]
    if not points:
        return '<p class="empty">fast_p was not measured (no GPU timing in this run).</p>'
    pmax = max(p for p, _ in points) or 1.0
    plot_w, plot_h = W - PAD - 120, H - PAD - 10
    parts = []
    for i, (name, pts) in enumerate(curves.items()):
        color = COLORS[i % len(COLORS)]
        xy = " ".join(f"{PAD + p / pmax * plot_w:.1f},{H - PAD - v * plot_h:.1f}" for p, v in pts)
        parts.append(f'<polyline class="curve" points="{xy}" fill="none" stroke="{color}" stroke-width="2"/>')
        parts.append(f'<text x="{W - 110}" y="{24 + 16 * i}" font-size="12" fill="{color}">{escape(name)}</text>')
    x_ticks = [(PAD + p / pmax * plot_w, f"{p:g}") for p in sorted({p for p, _ in points})]
    y_ticks = [(H - PAD - plot_h * k / 4, f"{k / 4:.2f}") for k in range(5)]
    return _svg("fast_p", _axes("speedup threshold p", "fast_p", x_ticks, y_ticks) + parts)


def bar_chart(counts: dict[str, int], label: str) -> str:
    """Horizontal bars, e.g. failure modes."""
    if not counts:
        return '<p class="empty">Nothing to show.</p>'
    top = max(counts.values()) or 1
    row_h = 22
    height = 20 + row_h * len(counts)
    label_w = int(12 + 6.8 * max(len(name) for name in counts))  # the longest label fits, whole
    width = max(W, label_w + 330)
    parts = []
    for i, (name, n) in enumerate(counts.items()):
        y = 10 + i * row_h
        w = (width - label_w - 70) * n / top
        parts.append(f'<text x="{label_w}" y="{y + 14}" font-size="12" text-anchor="end">{escape(name)}</text>')
        parts.append(f'<rect class="bar" x="{label_w + 6}" y="{y + 2}" width="{w:.1f}" height="{row_h - 6}" '
                     f'fill="{COLORS[1]}"/>')
        parts.append(f'<text x="{label_w + 10 + w:.1f}" y="{y + 14}" font-size="12">{n}</text>')
    body = "".join(parts)
    return (f'<svg class="plot" data-plot="{escape(label)}" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}" role="img">{body}</svg>')
