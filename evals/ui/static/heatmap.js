// kiln ui: where an incorrect candidate's mismatches fall in the output. The last two dimensions
// form the grid (binned to at most 64 x 48 cells), leading dimensions of 3-D and 4-D outputs get a
// strip each. The check record keeps the first few mismatch positions of each failing trial, so the
// map marks those positions and says how many mismatches there were in all.
"use strict";
(function () {
  const {s, h, fill} = kiln;
  const MAXC = 64, MAXR = 48, WIDTH = 520, HEIGHT = 300;

  function groups(mismatches) {
    const out = new Map();
    for (const m of mismatches) {
      if (!m.shape || !m.shape.length || m.shape.length > 4 || !m.first.length) continue;
      const key = (m.output || "out") + " " + JSON.stringify(m.shape);
      if (!out.has(key)) out.set(key, {output: m.output || "out", shape: m.shape, trials: [], pos: new Map()});
      const g = out.get(key);
      g.trials.push(m);
      for (const f of m.first) if (f.index && f.index.length === m.shape.length) g.pos.set(f.index.join(","), f.index);
    }
    return [...out.values()];
  }

  function bins(n, max) { const size = Math.ceil(n / Math.min(n, max)); return {size, count: Math.ceil(n / size)}; }

  function grid(g) {
    const shape = g.shape.length === 1 ? [1, g.shape[0]] : g.shape.slice(-2);
    const [R, C] = shape, br = bins(R, MAXR), bc = bins(C, MAXC);
    const cell = Math.max(4, Math.min(16, Math.floor(WIDTH / bc.count), Math.floor(HEIGHT / br.count)));
    const counts = new Map();
    for (const idx of g.pos.values()) {
      const r = g.shape.length === 1 ? 0 : idx[idx.length - 2], c = idx[idx.length - 1];
      const key = `${Math.floor(r / br.size)},${Math.floor(c / bc.size)}`;
      counts.set(key, (counts.get(key) || 0) + 1);
    }
    const left = 44, top = 8, w = left + bc.count * cell + 20, ht = top + br.count * cell + 34;
    const svg = s("svg", {class: "heatmap", width: w, height: ht, viewBox: `0 0 ${w} ${ht}`,
      "data-rows": R, "data-cols": C, "data-hits": counts.size});
    for (let i = 0; i < br.count; i++) {
      for (let j = 0; j < bc.count; j++) {
        const n = counts.get(`${i},${j}`) || 0;
        const rows = `${i * br.size}-${Math.min(R, (i + 1) * br.size) - 1}`, cols = `${j * bc.size}-${Math.min(C, (j + 1) * bc.size) - 1}`;
        svg.appendChild(s("rect", {x: left + j * cell, y: top + i * cell, width: cell - 1, height: cell - 1,
          class: n ? "hm-cell hit" : "hm-cell", "data-rows": rows, "data-cols": cols},
          s("title", {}, `rows ${rows}, cols ${cols}: ${n} known mismatch${n === 1 ? "" : "es"}`)));
      }
    }
    const lastR = top + br.count * cell;
    svg.appendChild(s("text", {x: left - 4, y: top + 9, "text-anchor": "end", class: "tick"}, "0"));
    svg.appendChild(s("text", {x: left - 4, y: lastR - 2, "text-anchor": "end", class: "tick"}, String(R - 1)));
    svg.appendChild(s("text", {x: left, y: lastR + 13, class: "tick"}, "0"));
    svg.appendChild(s("text", {x: left + bc.count * cell, y: lastR + 13, "text-anchor": "end", class: "tick"}, String(C - 1)));
    svg.appendChild(s("text", {x: left + bc.count * cell / 2, y: lastR + 28, "text-anchor": "middle", class: "label"},
      `columns (dim ${g.shape.length - 1})` + (bc.size > 1 ? `, ${bc.size} per cell` : "")));
    svg.appendChild(s("text", {x: 10, y: top + br.count * cell / 2, class: "label", "text-anchor": "middle",
      transform: `rotate(-90 10 ${top + br.count * cell / 2})`}, g.shape.length === 1 ? "" : "rows" + (br.size > 1 ? ` (${br.size}/cell)` : "")));
    return svg;
  }

  function strips(g) {
    return g.shape.slice(0, -2).map((n, d) => {
      const hit = new Set([...g.pos.values()].map((idx) => idx[d]));
      const b = bins(n, MAXC), cell = Math.max(4, Math.min(16, Math.floor(WIDTH / b.count)));
      const svg = s("svg", {class: "heatmap strip", width: 44 + b.count * cell, height: cell + 4});
      for (let j = 0; j < b.count; j++) {
        const any = [...hit].some((v) => Math.floor(v / b.size) === j);
        svg.appendChild(s("rect", {x: 44 + j * cell, y: 2, width: cell - 1, height: cell - 1, class: any ? "hm-cell hit" : "hm-cell"},
          s("title", {}, `dim ${d}: ${j * b.size}-${Math.min(n, (j + 1) * b.size) - 1}`)));
      }
      return h("div", {class: "strip-row"}, h("span", {class: "muted"}, `dim ${d} (size ${n}): `), svg);
    });
  }

  function caption(g) {
    const t = g.trials[0];
    const total = t.n_total ? `${t.n_mismatch} of ${t.n_total} elements (${(100 * t.n_mismatch / t.n_total).toFixed(2)}%)` : "";
    return h("p", {class: "muted"}, `${g.output} ${JSON.stringify(g.shape)}: ${total} mismatched in trial ` +
      `${t.case}/${t.distribution}/${t.trial}; ${g.pos.size} distinct positions known from ${g.trials.length} failing ` +
      "trial(s) (the check record keeps the first few per trial), marked red.");
  }

  function draw(el, mismatches) {
    const gs = groups(mismatches);
    if (!gs.length) {
      fill(el, h("p", {class: "muted"}, mismatches.length ? "No heat map: the failing trials have no recorded positions " +
        "in a 1-4-D output (shape, dtype or crash failures)." : "No mismatches."));
      return;
    }
    fill(el, gs.map((g) => h("div", {class: "heat", "data-output": g.output}, caption(g), strips(g), grid(g))));
  }

  kiln.heatmap = {draw, groups};
})();
