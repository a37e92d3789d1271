// kiln ui: small SVG plots (line with CI band, log-log roofline, histogram, horizontal bars).
"use strict";
(function () {
  const {s, h, fill} = kiln;
  const W = 520, H = 250, L = 56, R = 16, T = 14, B = 40;
  const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c"];

  function scale(lo, hi, a, b, log) {
    if (log) { lo = Math.log10(lo); hi = Math.log10(hi); }
    if (hi === lo) { hi = lo + 1; lo = lo - (log ? 0 : 0); }
    const f = (v) => a + ((log ? Math.log10(v) : v) - lo) / (hi - lo) * (b - a);
    return f;
  }

  function niceTicks(lo, hi, n) {
    const span = hi - lo || 1;
    const step = Math.pow(10, Math.floor(Math.log10(span / n)));
    const mult = [1, 2, 5, 10].find((m) => span / (m * step) <= n) * step;
    const out = [];
    for (let v = Math.ceil(lo / mult) * mult; v <= hi + 1e-9; v += mult) out.push(+v.toFixed(10));
    return out;
  }

  function logTicks(lo, hi) {
    const out = [];
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      const v = Math.pow(10, e);
      if (v >= lo * 0.999 && v <= hi * 1.001) out.push(v);
    }
    return out;
  }

  const fmtTick = (v) => Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-2 && v !== 0) ? v.toExponential(0) : String(+v.toPrecision(4));

  function frame(kind, xs, ys, xt, yt, xLabel, yLabel) {
    const g = [s("line", {x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis"}),
      s("line", {x1: L, y1: T, x2: L, y2: H - B, class: "axis"})];
    for (const v of yt) {
      g.push(s("line", {x1: L, x2: W - R, y1: ys(v), y2: ys(v), class: "gridline"}));
      g.push(s("text", {x: L - 6, y: ys(v) + 4, "text-anchor": "end", class: "tick"}, fmtTick(v)));
    }
    for (const v of xt) g.push(s("text", {x: xs(v), y: H - B + 16, "text-anchor": "middle", class: "tick"}, fmtTick(v)));
    g.push(s("text", {x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle", class: "label"}, xLabel));
    g.push(s("text", {x: 14, y: (T + H - B) / 2, "text-anchor": "middle", class: "label",
      transform: `rotate(-90 14 ${(T + H - B) / 2})`}, yLabel));
    return s("svg", {class: "plot", "data-plot": kind, viewBox: `0 0 ${W} ${H}`, role: "img"}, g);
  }

  function empty(el, text) { fill(el, h("p", {class: "muted empty"}, text)); }

  function extent(values, pad) {
    let lo = Math.min(...values), hi = Math.max(...values);
    if (lo === hi) { lo -= pad || 1; hi += pad || 1; }
    return [lo, hi];
  }

  // series: [{name, points: [{x, y, lo, hi, id}]}]; ref: a dashed horizontal line (e.g. 1x)
  function line(el, series, o) {
    const pts = series.flatMap((se) => se.points);
    if (!pts.length) return empty(el, o.empty);
    let [x0, x1] = extent(pts.map((p) => p.x), 0.5);
    if (x1 - x0 < 1) { const mid = (x0 + x1) / 2; x0 = mid - 0.5; x1 = mid + 0.5; }
    const yv = pts.flatMap((p) => [p.y, p.lo ?? p.y, p.hi ?? p.y]).concat(o.ref !== undefined ? [o.ref] : []);
    let [y0, y1] = extent(yv, Math.abs(yv[0]) * 0.1 || 1);
    if (o.zero) { y0 = 0; y1 = Math.max(y1, Math.max(...yv) > 0 ? 0 : 1); }
    const padY = (y1 - y0) * 0.08; y1 += padY; if (!o.zero) y0 -= padY;
    const xs = scale(x0, x1, L + 8, W - R - 8), ys = scale(y0, y1, H - B, T);
    const svg = frame(o.kind, xs, ys, niceTicks(x0, x1, 6), niceTicks(y0, y1, 5), o.xLabel, o.yLabel);
    if (o.ref !== undefined) svg.appendChild(s("line", {x1: L, x2: W - R, y1: ys(o.ref), y2: ys(o.ref), class: "ref"}));
    series.forEach((se, i) => {
      const color = se.color || COLORS[i % COLORS.length];
      const band = se.points.filter((p) => p.lo !== undefined && p.lo !== null);
      if (band.length) {
        const d = band.map((p, k) => `${k ? "L" : "M"}${xs(p.x)},${ys(p.hi)}`).join("") +
          [...band].reverse().map((p) => `L${xs(p.x)},${ys(p.lo)}`).join("") + "Z";
        svg.appendChild(s("path", {d, fill: color, opacity: 0.15, class: "band"}));
      }
      const path = se.points.map((p, k) => `${k ? "L" : "M"}${xs(p.x)},${ys(p.y)}`).join("");
      svg.appendChild(s("path", {d: path, fill: "none", stroke: color, "stroke-width": 2, class: "series"}));
      for (const p of se.points) {
        svg.appendChild(s("circle", {cx: xs(p.x), cy: ys(p.y), r: 3.5, fill: color, class: "pt"},
          s("title", {}, p.title || `${se.name}: ${fmtTick(p.y)}`)));
      }
      if (series.length > 1) svg.appendChild(s("text", {x: W - R - 4, y: T + 12 + 14 * i, "text-anchor": "end",
        fill: color, class: "legend-text"}, se.name));
    });
    fill(el, svg);
  }

  // Roofline: log-log, x = FLOP/byte, y = GFLOP/s (or GB/s when a kernel does no FLOPs).
  function roofline(el, points, peaks, o) {
    if (!points.length) return empty(el, o.empty);
    const xs0 = points.map((p) => Math.max(p.ai, 1e-3)), ys0 = points.map((p) => Math.max(p.gflops, 1e-3));
    const ridge = peaks.gbps && peaks.tflops ? peaks.tflops * 1e3 / peaks.gbps : null;
    let x0 = Math.min(...xs0, 0.05) / 2, x1 = Math.max(...xs0, ridge ? ridge * 4 : 10) * 2;
    let y0 = Math.min(...ys0) / 4, y1 = Math.max(...ys0, peaks.tflops ? peaks.tflops * 1e3 : 1) * 2;
    const xs = scale(x0, x1, L, W - R, true), ys = scale(y0, y1, H - B, T, true);
    const svg = frame("roofline", xs, ys, logTicks(x0, x1), logTicks(y0, y1), "arithmetic intensity (FLOP/byte)", "GFLOP/s");
    if (peaks.gbps) {
      const roof = (x) => Math.min(peaks.gbps * x, peaks.tflops ? peaks.tflops * 1e3 : Infinity);
      const steps = 60, d = [];
      for (let k = 0; k <= steps; k++) {
        const x = Math.pow(10, Math.log10(x0) + (Math.log10(x1) - Math.log10(x0)) * k / steps);
        d.push(`${k ? "L" : "M"}${xs(x)},${ys(Math.max(roof(x), y0))}`);
      }
      svg.appendChild(s("path", {d: d.join(""), class: "roof", fill: "none"}));
      svg.appendChild(s("text", {x: W - R - 4, y: ys(Math.min(roof(x1), y1)) - 6, "text-anchor": "end", class: "tick"},
        `roof: ${fmtTick(peaks.gbps)} GB/s, ${fmtTick(peaks.tflops || 0)} TFLOP/s`));
    }
    const taken = [];
    for (const p of points) {
      const lx = xs(Math.max(p.ai, 1e-3)) + 7;
      let ly = ys(Math.max(p.gflops, 1e-3)) + 4;
      while (taken.some(([x, y]) => Math.abs(x - lx) < 40 && Math.abs(y - ly) < 11)) ly += 11;  // labels never overlap
      taken.push([lx, ly]);
      const g = s("g", {class: "rpt", "data-id": p.id, on: o.onClick ? {click: () => o.onClick(p.id)} : {}},
        s("circle", {cx: xs(Math.max(p.ai, 1e-3)), cy: ys(Math.max(p.gflops, 1e-3)), r: 5, class: "st-fill-" + p.status},
          s("title", {}, `${p.id}: ${fmtTick(p.gflops)} GFLOP/s, ${fmtTick(p.gbps)} GB/s` +
            (p.pct ? `, ${p.pct.toFixed(0)}% of the floor` : ""))),
        s("text", {x: lx, y: ly, class: "tick"}, p.id));
      svg.appendChild(g);
    }
    fill(el, svg);
  }

  // Histogram of speedups on a log2 axis, the 1x line dashed.
  function hist(el, values, o) {
    if (!values.length) return empty(el, o.empty);
    const logs = values.map((v) => Math.log2(Math.max(v, 1e-3)));
    const lo = Math.floor(Math.min(...logs, -1)), hi = Math.ceil(Math.max(...logs, 1));
    const nb = Math.max(1, (hi - lo) * 2), counts = new Array(nb).fill(0);
    for (const v of logs) counts[Math.min(nb - 1, Math.floor((v - lo) / (hi - lo) * nb))] += 1;
    const top = Math.max(...counts);
    const xs = scale(lo, hi, L, W - R), ys = scale(0, top, H - B, T);
    const xt = []; for (let e = lo; e <= hi; e++) xt.push(e);
    const svg = frame("histogram", xs, ys, [], niceTicks(0, top, 4).filter((v) => Number.isInteger(v)), o.xLabel, "problems");
    for (const e of xt) svg.appendChild(s("text", {x: xs(e), y: H - B + 16, "text-anchor": "middle", class: "tick"}, `${Math.pow(2, e)}x`));
    const bw = (W - R - L) / nb;
    counts.forEach((c, i) => svg.appendChild(s("rect", {x: L + i * bw + 1, y: ys(c), width: bw - 2, height: H - B - ys(c),
      class: "bar"}, s("title", {}, String(c)))));
    svg.appendChild(s("line", {x1: xs(0), x2: xs(0), y1: T, y2: H - B, class: "ref"}));
    fill(el, svg);
  }

  // Horizontal bars: [{label, n, href}]
  function bars(el, items, o) {
    if (!items.length) return empty(el, o.empty);
    const top = Math.max(...items.map((i) => i.n)) || 1, rowH = 24, w = W, height = 12 + rowH * items.length;
    const svg = s("svg", {class: "plot", "data-plot": o.kind, viewBox: `0 0 ${w} ${height}`, role: "img"});
    items.forEach((it, i) => {
      const y = 6 + i * rowH, bw = (w - 250) * it.n / top;
      svg.appendChild(s("text", {x: 180, y: y + 15, "text-anchor": "end", class: "tick"}, it.label));
      svg.appendChild(s("rect", {x: 186, y: y + 3, width: Math.max(bw, 1), height: rowH - 8, class: "bar fail"}));
      svg.appendChild(s("text", {x: 192 + bw, y: y + 15, class: "tick"}, String(it.n)));
    });
    fill(el, svg);
  }

  kiln.plot = {line, roofline, hist, bars, COLORS};
})();
