// kiln ui: the run page. Draws the embedded JSON at once, then follows the run live.
"use strict";
(function () {
  const {h, fill, $} = kiln;
  let run = kiln.data();
  let selected = new URLSearchParams(location.search).get("node");
  const api = "/api/run/" + run.id.split("/").map(encodeURIComponent).join("/");
  const sse = "/sse/run/" + run.id.split("/").map(encodeURIComponent).join("/");

  function head() {
    const o = run.options || {}, sm = run.summary || {};
    const best = run.nodes.find((n) => n.id === run.best);
    const stop = kiln.controlOn() && run.control && run.control.stoppable
      ? h("button", {class: "btn danger", type: "button", on: {click: stopRun}}, "Stop run") : null;
    const stats = [["status", kiln.badge(run.status)], ["problem", String(o.problem || "").split("/").pop()],
      ["strategy", o.strategy], ["device", o.device], ["lang", o.lang], ["candidates", String(run.nodes.length)],
      ["best", best ? `${best.id} (${best.correct ? "correct" : "failing"})` : "—"],
      ["vs eager", kiln.speed(best && best.eager)], ["vs torch.compile", kiln.speed(best && best.compile)],
      ["tokens", kiln.tokens(run.usage.points.length ? run.usage.points[run.usage.points.length - 1].tokens : 0)],
      ["cost", kiln.usd(run.usage.points.length ? run.usage.points[run.usage.points.length - 1].cost_usd : null)],
      ["started", kiln.age(run.start_t)], ["last event", kiln.age(run.last_t)]];
    fill($("#head"), h("div", {class: "card-head"}, h("h1", {}, run.name), stop),
      h("div", {class: "stats"}, stats.map(([k, v]) => h("div", {class: "stat"}, h("div", {class: "k"}, k), h("div", {class: "v"}, v)))),
      sm.stop_reason ? h("p", {class: "muted"}, "Stop reason: " + sm.stop_reason) : null,
      sm.note ? h("p", {class: "note"}, sm.note) : null);
  }

  async function stopRun() {
    try { await kiln.postJSON("/api/control/stop", {run: run.id}); } catch (err) { alert(String(err)); }
  }

  function plots() {
    const best = run.best_series.map((p) => ({x: p.iteration, y: p.value, lo: p.ci_low, hi: p.ci_high,
      title: `iteration ${p.iteration}: ${p.id} ${kiln.speed(p)}`}));
    kiln.plot.line($("#plot-best"), [{name: "best vs eager", points: best}], {kind: "best", xLabel: "iteration",
      yLabel: "speedup (x)", ref: 1, empty: "No measured speedup yet" + (run.options.device === "cpu" ? " (a CPU run is not timed)." : ".")});
    const u = run.usage.points, xLabel = run.usage.axis;
    const series = [{name: "tokens", points: u.map((p) => ({x: p.x, y: p.tokens, title: `${p.role}: ${p.tokens} tokens`}))}];
    const spent = u.length && u[u.length - 1].tokens > 0;
    kiln.plot.line($("#plot-usage"), spent ? series : [], {kind: "tokens", xLabel, yLabel: "tokens (cumulative)",
      zero: true, empty: u.length ? `${u.length} calls, no tokens counted (built-in or scripted roles).` : "No LLM calls yet."});
    const costs = u.filter((p) => p.cost_usd !== null);
    if (costs.length) {
      const el = h("div", {});
      $("#plot-usage").appendChild(el);
      kiln.plot.line(el, [{name: "cost", color: "#16a34a", points: costs.map((p) => ({x: p.x, y: p.cost_usd, title: `${p.role}: ${kiln.usd(p.cost_usd)}`}))}],
        {kind: "cost", xLabel, yLabel: "cost (USD, cumulative)", zero: true, empty: ""});
    }
    const pts = run.nodes.filter((n) => n.roofline).map((n) => ({id: n.id, status: n.status, ...n.roofline}));
    const peak = pts.find((p) => p.peak_gbps) || {};
    kiln.plot.roofline($("#plot-roofline"), pts, {gbps: peak.peak_gbps, tflops: peak.peak_tflops},
      {empty: "No roofline point: needs a timed check (GPU) with a physics record.", onClick: select});
  }

  function events() {
    const evs = run.events.slice(-60).reverse();
    fill($("#events"), h("div", {class: "muted"}, `${run.n_events} events, newest first`),
      h("table", {class: "grid small"}, evs.map((e) => h("tr", {"data-kind": e.kind},
        h("td", {class: "num"}, new Date(e.t * 1000).toLocaleTimeString()), h("td", {}, e.kind),
        h("td", {}, Object.entries(e).filter(([k]) => k !== "t" && k !== "kind").map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`).join("  "))))));
  }

  function drawTree() {
    kiln.tree.draw($("#tree"), run.nodes, {best: run.best, selected, root: run.root, onClick: select});
    kiln.tree.legend($("#legend"), run.nodes);
  }

  async function select(id) {
    selected = id;
    history.replaceState(null, "", "?node=" + encodeURIComponent(id));
    drawTree();
    const panel = $("#node");
    panel.hidden = false;
    try {
      const d = await kiln.getJSON("/api/node/" + run.id.split("/").map(encodeURIComponent).join("/") + "?id=" + encodeURIComponent(id));
      if (selected !== id) return;
      kiln.node.render(panel, d, select);
      panel.setAttribute("data-node", id);
    } catch (err) { fill(panel, h("p", {class: "err"}, String(err))); }
  }

  function draw() {
    const inBatch = run.id.match(/^(.*)\/problems\/([^/]+)\/sample(\d+)\/run$/);
    if (inBatch) kiln.crumbs({text: "runs", href: "/"}, {text: inBatch[1].split("/").pop(), href: kiln.batchHref(inBatch[1])},
      {text: `${inBatch[2].replace("__", "/")} #${inBatch[3]}`});
    else kiln.crumbs({text: "runs", href: "/"}, {text: run.name});
    head(); drawTree(); plots(); events();
    document.body.setAttribute("data-rendered", String(run.n_events));
  }

  draw();
  if (selected) select(selected);
  const nodeSig = (id) => JSON.stringify(run.nodes.find((n) => n.id === id) || null);
  kiln.live(sse, async () => {
    const before = selected ? nodeSig(selected) : null;
    run = await kiln.getJSON(api);
    draw();
    if (selected && $("#node").getAttribute("data-node") === selected && nodeSig(selected) !== before) await select(selected);
  });
})();
