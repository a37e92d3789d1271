// kiln ui: the runs page. Every run and batch under the served folders, live.
"use strict";
(function () {
  const {h, fill, $} = kiln;
  let items = kiln.data().items;
  let sortState = {key: "last", dir: -1};

  const link = (it) => it.kind === "batch" ? kiln.batchHref(it.id) : kiln.runHref(it.id);
  const COLUMNS = [
    {key: "kind", label: "", cell: (r) => h("td", {class: "kind"}, r.kind), sort: (r) => r.kind},
    {key: "name", label: "name", cell: (r) => h("td", {}, h("a", {href: link(r), class: "name"}, r.name),
      h("div", {class: "muted small"}, r.id)), sort: (r) => r.name},
    {key: "status", label: "status", cell: (r) => h("td", {}, kiln.badge(r.status)), sort: (r) => r.status},
    {key: "problem", label: "problem", cell: (r) => h("td", {}, r.problem || "—"), sort: (r) => r.problem || ""},
    {key: "strategy", label: "strategy / mode", cell: (r) => h("td", {}, [r.strategy, r.device].filter(Boolean).join(" · ")), sort: (r) => r.strategy || ""},
    {key: "eager", label: "best vs eager", cell: (r) => kiln.speedCell(r.eager), sort: (r) => r.eager ? r.eager.value : -1},
    {key: "compile", label: "best vs compile", cell: (r) => kiln.speedCell(r.compile), sort: (r) => r.compile ? r.compile.value : -1},
    {key: "candidates", label: "candidates / problems", cell: (r) => h("td", {class: "num"},
      r.kind === "batch" ? `${r.correct} of ${r.candidates} correct` : `${r.candidates ?? "—"}${r.correct ? " (best correct)" : ""}`),
    sort: (r) => r.candidates || 0},
    {key: "tokens", label: "tokens", cell: (r) => h("td", {class: "num"}, kiln.tokens(r.tokens)), sort: (r) => r.tokens || 0},
    {key: "cost", label: "cost", cell: (r) => h("td", {class: "num"}, kiln.usd(r.cost_usd)), sort: (r) => r.cost_usd || 0},
    {key: "last", label: "age", cell: (r) => h("td", {class: "num", title: r.start_t ? "started " + new Date(r.start_t * 1000).toLocaleString() : ""},
      kiln.age(r.last_t)), sort: (r) => r.last_t || 0},
  ];

  function startForm() {
    if (!kiln.controlOn()) return;
    const problem = h("input", {type: "text", placeholder: "problem file id, e.g. 0/examples/softmax.py", size: 40, "aria-label": "problem"});
    const strategy = h("select", {"aria-label": "strategy"}, ["linear", "beam", "mcts"].map((x) => h("option", {value: x}, x)));
    const iters = h("input", {type: "number", value: 8, min: 1, max: 100, "aria-label": "max iterations"});
    const msg = h("span", {class: "muted"});
    const go = async () => {
      try {
        const out = await kiln.postJSON("/api/control/start", {problem: problem.value, strategy: strategy.value, max_iters: Number(iters.value)});
        location.href = kiln.runHref(out.run);
      } catch (err) { msg.textContent = String(err); }
    };
    fill($("#start"), h("div", {class: "start"}, h("strong", {}, "Start a run: "), problem, strategy, iters,
      h("button", {class: "btn", type: "button", on: {click: go}}, "Start"), msg));
  }

  function draw() {
    kiln.crumbs({text: "runs"});
    $("#count").textContent = `${items.filter((i) => i.kind === "run").length} runs, ${items.filter((i) => i.kind === "batch").length} batches`;
    $("#empty").hidden = items.length > 0;
    sortState = kiln.table($("#runs"), COLUMNS, items, sortState);
    document.body.setAttribute("data-rendered", String(items.length));
  }

  startForm();
  draw();
  kiln.live("/sse/runs", async () => { items = (await kiln.getJSON("/api/runs")).items; draw(); });
})();
