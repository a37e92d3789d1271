// kiln ui: the candidate tree. A tidy layout: leaves take consecutive slots, a parent sits over the
// middle of its children; depth is the row. Linear runs are a chain, beam runs a broad tree, MCTS
// nodes show their visit count n and mean value v.
"use strict";
(function () {
  const {s, h, fill} = kiln;
  const NW = 132, NH = 62, SX = 146, SY = 104, PAD = 24;

  function layout(nodes) {
    const kids = new Map([["root", []]]);
    for (const n of nodes) kids.set(n.id, []);
    for (const n of nodes) (kids.get(n.parent && kids.has(n.parent) ? n.parent : "root")).push(n.id);
    const pos = new Map();
    let slot = 0, depthMax = 0;
    const place = (id, depth) => {
      depthMax = Math.max(depthMax, depth);
      const ch = kids.get(id) || [];
      if (!ch.length) { pos.set(id, {x: slot++, depth}); return; }
      for (const c of ch) place(c, depth + 1);
      pos.set(id, {x: (pos.get(ch[0]).x + pos.get(ch[ch.length - 1]).x) / 2, depth});
    };
    place("root", 0);
    return {pos, width: Math.max(slot, 1), depth: depthMax};
  }

  const X = (p) => PAD + p.x * SX + NW / 2, Y = (p) => PAD + p.depth * SY;

  function edge(pp, cp, mode) {
    const x1 = X(pp), y1 = Y(pp) + NH, x2 = X(cp), y2 = Y(cp), my = (y1 + y2) / 2;
    return s("g", {class: "edge"},
      s("path", {d: `M${x1},${y1} C${x1},${my} ${x2},${my} ${x2},${y2}`, fill: "none"}),
      mode ? s("text", {x: (x1 + x2) / 2 + (x2 >= x1 ? 4 : -4), y: my + 4, "text-anchor": x2 >= x1 ? "start" : "end",
        class: "edge-label mode-" + mode}, mode) : null);
  }

  function nodeText(n) {
    const sp = n.eager ? `${kiln.num(n.eager.value)}x [${kiln.num(n.eager.ci_low)}–${kiln.num(n.eager.ci_high)}]`
      : (n.correct ? "correct, not timed" : n.status.replace("_", " "));
    const mcts = n.visits ? `n=${n.visits} v=${kiln.num(n.value)}` : (n.reward !== null ? `reward ${kiln.num(n.reward)}` : "");
    return [sp, mcts];
  }

  function drawNode(n, p, o) {
    const [line1, line2] = nodeText(n);
    const cls = "node st-" + n.status + (n.id === o.best ? " best" : "") + (n.id === o.selected ? " selected" : "");
    return s("g", {class: cls, "data-id": n.id, "data-status": n.status, tabindex: 0, role: "button",
      transform: `translate(${X(p) - NW / 2},${Y(p)})`,
      on: {click: () => o.onClick(n.id), keydown: (e) => { if (e.key === "Enter") o.onClick(n.id); }}},
      s("rect", {width: NW, height: NH, rx: 8, class: "box"}),
      s("rect", {width: 8, height: NH, rx: 3, class: "stripe"}),
      s("text", {x: 16, y: 18, class: "nid"}, n.id + (n.id === o.best ? " ★" : "")),
      s("text", {x: 16, y: 35, class: "nline"}, line1),
      s("text", {x: 16, y: 51, class: "nline muted"}, line2),
      s("title", {}, `${n.id} (${n.status})` + (n.reasons && n.reasons.length ? "\n" + n.reasons.join("\n") : "")));
  }

  function draw(el, nodes, o) {
    if (!nodes.length) { fill(el, h("p", {class: "muted empty"}, "No candidate yet.")); return; }
    const {pos, width, depth} = layout(nodes);
    const w = PAD * 2 + (width - 1) * SX + NW, ht = PAD * 2 + depth * SY + NH;
    const svg = s("svg", {class: "tree", width: w, height: ht, viewBox: `0 0 ${w} ${ht}`, "data-nodes": nodes.length});
    const rp = pos.get("root");
    for (const n of nodes) {
      const parent = n.parent && pos.has(n.parent) ? n.parent : "root";
      svg.appendChild(edge(pos.get(parent), pos.get(n.id), n.mode));
    }
    svg.appendChild(s("g", {class: "root", transform: `translate(${X(rp) - NW / 2},${Y(rp)})`},
      s("rect", {width: NW, height: NH, rx: 8, class: "box"}),
      s("text", {x: NW / 2, y: 26, "text-anchor": "middle", class: "nid"}, "problem"),
      s("text", {x: NW / 2, y: 44, "text-anchor": "middle", class: "nline muted"},
        o.root ? `n=${o.root.visits} v=${kiln.num(o.root.value)}` : "root")));
    for (const n of nodes) svg.appendChild(drawNode(n, pos.get(n.id), o));
    fill(el, svg);
  }

  function legend(el, nodes) {
    const seen = new Set(nodes.map((n) => n.status));
    fill(el, kiln.STATUS.filter((st) => seen.has(st)).map((st) => h("span", {class: "legend-item"},
      h("span", {class: "swatch st-bg-" + st}), st.replace("_", " ") + ` (${nodes.filter((n) => n.status === st).length})`)));
  }

  kiln.tree = {draw, legend, layout};
})();
