// kiln ui: the batch page. Progress, metrics.json, the report's plots, failure modes and a sortable,
// filterable table of problems, live.
"use strict";
(function () {
  const {h, fill, $} = kiln;
  let b = kiln.data();
  let sortState = {key: "problem", dir: 1};
  const api = "/api/batch/" + b.id.split("/").map(encodeURIComponent).join("/");
  const sse = "/sse/batch/" + b.id.split("/").map(encodeURIComponent).join("/");
  const BASELINES = ["eager", "eager_tf32", "compile"];

  function head() {
    const c = b.settings, has = (v) => v !== null && v !== undefined && v !== "";
    const parts = [has(c.mode) && `${c.mode} mode`, has(c.samples) && `${c.samples} sample(s) per problem`, c.llm,
      c.strategy, c.lang, c.device, c.dtype, has(c.max_iters) && `up to ${c.max_iters} iterations`].filter(has);
    fill($("#head"), h("div", {class: "card-head"}, h("h1", {}, b.name), kiln.badge(b.progress.status)),
      h("p", {class: "muted", id: "settings"}, parts.join(" · ")),
      b.metrics.stopped ? h("p", {class: "note"}, "Stopped: " + b.metrics.stopped) : null);
  }

  function progress() {
    const p = b.progress, total = p.n_expected || 1;
    const seg = (n, cls) => h("span", {class: "seg " + cls, "data-w": (100 * n / total).toFixed(2), title: `${n} ${cls}`});
    const bar = h("div", {class: "progress"}, seg(p.done, "done"), seg(p.running, "running"), seg(p.queued, "queued"));
    const gpus = b.settings.device === "cpu" ? "" : Object.entries(p.by_gpu).map(([g, n]) =>
      `${g === "unknown" ? "GPU not recorded yet" : "GPU " + g}: ${n}`).join(", ");
    fill($("#progress"), h("h2", {}, "Progress"), bar,
      h("p", {}, `${p.done} done · ${p.running} running · ${p.queued} queued of ${p.n_expected}` +
        (p.eta_s !== null ? ` · ETA ${kiln.secs(p.eta_s)}` : "") + (gpus ? ` · running per GPU: ${gpus}` : "")),
      b.running.length ? h("ul", {class: "running"}, b.running.map((r) => h("li", {},
        r.run ? h("a", {href: kiln.runHref(r.run)}, `${r.problem} #${r.sample}`) : `${r.problem} #${r.sample}`,
        ` · ${r.stage || "starting"}` + (r.last_t ? ` · last event at ${new Date(r.last_t * 1000).toLocaleTimeString()}` : "")))) : null);
    bar.querySelectorAll(".seg").forEach((s) => { s.style.width = s.dataset.w + "%"; });
  }

  function metrics() {
    const m = b.metrics, c = m.cost || {};
    const cards = [["problems", m.n_problems], ["samples", m.n_samples], ["compile rate", kiln.pct(m.compile_rate)],
      ["correct rate", kiln.pct(m.correct_rate)],
      ...Object.entries(m.pass_at_k || {}).map(([k, v]) => [`pass@${k}`, kiln.num(v, 3)]),
      ...BASELINES.map((bl) => [`fast_1 / fast_0 vs ${bl}`, `${kiln.num((m.fast_p[bl] || {})["1.0"])} / ${kiln.num((m.fast_p[bl] || {})["0.0"])}`]),
      ...BASELINES.map((bl) => [`geomean vs ${bl}`, m.geomean_speedup[bl] ? kiln.num(m.geomean_speedup[bl], 3) + "x" : "—"]),
      ["confidently faster (eager)", m.confident_faster.eager ?? "—"], ["degenerate problems", m.degenerate_problems],
      ["tokens", kiln.tokens(c.tokens)], ["cost", kiln.usd(c.cost_usd)], ["cost per solved", kiln.usd(c.cost_per_solved_usd)],
      ["GPU hours", kiln.num(c.gpu_hours, 3)]];
    fill($("#metrics"), cards.map(([k, v]) => h("div", {class: "stat"}, h("div", {class: "k"}, k), h("div", {class: "v"}, String(v)))),
      m.timed ? null : h("p", {class: "note wide"}, "Speed was not measured in this batch (no GPU): every speed figure is —, not 0."));
  }

  function failureModes() {
    const modes = new Map();
    const add = (k, r) => { if (!modes.has(k)) modes.set(k, []); modes.get(k).push(r); };
    for (const r of b.rows) {
      if (r.status !== "ok") add(r.status, r);
      for (const rule of r.rejected) add("rejected: " + rule, r);
    }
    return [...modes.entries()].sort((x, y) => y[1].length - x[1].length);
  }

  function plots() {
    const m = b.metrics;
    kiln.plot.hist($("#plot-hist"), b.rows.filter((r) => r.correct && r.eager).map((r) => r.eager.value),
      {xLabel: "speedup vs eager (log scale)", empty: "No measured speedups (no GPU, or no correct kernel)."});
    const series = BASELINES.filter((bl) => m.fast_p[bl] && m.fast_p[bl]["0.0"] !== null).map((bl) => ({name: bl,
      points: Object.entries(m.fast_p[bl]).map(([p, v]) => ({x: Number(p), y: v}))}));
    kiln.plot.line($("#plot-fastp"), series, {kind: "fast_p", xLabel: "speedup threshold p", yLabel: "fast_p", zero: true,
      empty: "fast_p was not measured (no GPU timing in this batch)."});
    kiln.plot.bars($("#plot-fail"), failureModes().map(([k, rs]) => ({label: k, n: rs.length})), {kind: "failures", empty: "No failures."});
  }

  const problemHref = (r) => {
    if (r.runs.length) return kiln.runHref(r.runs[0]);
    const f = ["check.json", "error.txt", "candidate.py", "reply.md"].find((n) => r.files[n]);
    return f ? kiln.fileHref(r.files[f]) : null;
  };

  function failures() {
    const modes = failureModes();
    fill($("#failures"), modes.length ? modes.map(([k, rs]) => h("details", {class: "failure", open: rs.length <= 12},
      h("summary", {}, `${k} (${rs.length})`), h("ul", {class: "inline"}, rs.map((r) => h("li", {},
        problemHref(r) ? h("a", {href: problemHref(r)}, r.problem) : r.problem,
        r.reasons.length ? h("span", {class: "muted"}, " — " + r.reasons[0].slice(0, 300)) : null)))))
      : h("p", {class: "muted"}, "No failing problem."));
  }

  const COLUMNS = [
    {key: "problem", label: "problem", cell: (r) => h("td", {class: "name"}, problemHref(r) ? h("a", {href: problemHref(r)}, kiln.breakable(r.problem)) : kiln.breakable(r.problem)), sort: (r) => r.problem},
    {key: "status", label: "status", cell: (r) => h("td", {}, kiln.badge(r.status)), sort: (r) => r.status},
    {key: "samples", label: "correct / samples", cell: (r) => h("td", {class: "num"}, `${r.n_correct} / ${r.samples}`), sort: (r) => r.n_correct / r.samples},
    {key: "eager", label: "vs eager [95% CI]", cell: (r) => kiln.speedCell(r.eager), sort: (r) => r.eager ? r.eager.value : -1},
    {key: "compile", label: "vs compile [95% CI]", cell: (r) => kiln.speedCell(r.compile), sort: (r) => r.compile ? r.compile.value : -1},
    {key: "tokens", label: "tokens", cell: (r) => h("td", {class: "num"}, kiln.tokens(r.tokens)), sort: (r) => r.tokens},
    {key: "cost", label: "cost", cell: (r) => h("td", {class: "num"}, kiln.usd(r.cost_usd)), sort: (r) => r.cost_usd || 0},
    {key: "wall", label: "wall", cell: (r) => h("td", {class: "num"}, kiln.secs(r.wall_s)), sort: (r) => r.wall_s},
  ];

  // the reasons, and a one-shot sample's source, on a line of their own under the problem's row
  const reasons = (r) => r.reasons.length || r.files["candidate.py"] ? h("span", {class: "reasons"},
    r.reasons.length ? "why: " + r.reasons.join("; ").slice(0, 400) : null,
    r.files["candidate.py"] ? [" ", h("a", {href: kiln.fileHref(r.files["candidate.py"])}, "source")] : null) : null;

  function table() {
    const q = $("#filter").value.toLowerCase(), st = $("#status-filter").value;
    const rows = b.rows.filter((r) => (!q || r.problem.toLowerCase().includes(q) || r.reasons.join(" ").toLowerCase().includes(q))
      && (!st || r.status === st));
    sortState = kiln.table($("#problems"), COLUMNS, rows, sortState, reasons);
  }

  function statusOptions() {
    const sel = $("#status-filter"), have = new Set([...sel.options].map((o) => o.value));
    for (const st of [...new Set(b.rows.map((r) => r.status))].sort()) if (!have.has(st)) sel.appendChild(h("option", {value: st}, st));
  }

  function draw() {
    kiln.crumbs({text: "runs", href: "/"}, {text: b.name});
    head(); progress(); metrics(); statusOptions(); table(); plots(); failures();
    document.body.setAttribute("data-rendered", String(b.rows.length));
  }

  $("#filter").addEventListener("input", table);
  $("#status-filter").addEventListener("change", table);
  draw();
  requestAnimationFrame(() => { document.body.setAttribute("data-painted", String(performance.now())); });
  kiln.live(sse, async () => { b = await kiln.getJSON(api); draw(); });
})();
