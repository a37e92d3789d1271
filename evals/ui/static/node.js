// kiln ui: the panel of one candidate (source, diff, check, mismatches, integrity, profile, Judge,
// Proposer, prompt and reply, repro). Everything recorded is shown as text.
"use strict";
(function () {
  const {h, fill} = kiln;
  const LINE_REF = /((?:kernel|candidate)\.py)(?:", line |:)(\d+)/g;

  function pre(text, cls) { return h("pre", {class: "code " + (cls || "")}, linkify(text || "")); }

  // Text with "kernel.py:14" and 'kernel.py", line 23' turned into links to that source line.
  function linkify(text) {
    const out = [];
    let last = 0;
    for (const m of text.matchAll(LINE_REF)) {
      out.push(text.slice(last, m.index));
      const line = Number(m[2]);
      out.push(h("a", {href: "#L" + line, class: "line-link", "data-line": line,
        on: {click: (e) => { e.preventDefault(); gotoLine(line); }}}, m[0]));
      last = m.index + m[0].length;
    }
    out.push(text.slice(last));
    return out;
  }

  function gotoLine(n) {
    showTab("source");
    const row = document.querySelector(`#src-lines [data-line="${n}"]`);
    document.querySelectorAll("#src-lines .hl").forEach((r) => r.classList.remove("hl"));
    if (row) { row.classList.add("hl"); row.scrollIntoView({block: "center"}); }
  }

  // A small Python highlighter: comments, strings (triple-quoted ones across lines), keywords,
  // numbers, decorators. It only splits the text into spans; every piece stays a text node.
  const KW = "def|class|return|import|from|as|if|elif|else|for|while|in|not|and|or|is|None|True|False|with|try|" +
    "except|finally|raise|lambda|yield|pass|break|continue|assert|global|nonlocal|del|async|await";
  const TOKEN = new RegExp(`(#.*$)|("""|\'\'\')|("(?:\\\\.|[^"\\\\])*"|'(?:\\\\.|[^'\\\\])*')|\\b(${KW})\\b|` +
    "(\\b\\d+(?:\\.\\d+)?(?:e[+-]?\\d+)?\\b)|(@[\\w.]+)", "g");
  const CLASSES = [null, "c", null, "s", "k", "n", "d"];

  function highlight(line, state) {
    const out = [];
    let i = 0;
    if (state.open) {
      const end = line.indexOf(state.open);
      if (end < 0) return [h("span", {class: "s"}, line)];
      out.push(h("span", {class: "s"}, line.slice(0, end + 3)));
      i = end + 3; state.open = null;
    }
    TOKEN.lastIndex = i;
    for (let m; (m = TOKEN.exec(line));) {
      out.push(line.slice(i, m.index));
      if (m[2]) {  // a triple quote opens a string that may end on this line or a later one
        const end = line.indexOf(m[2], m.index + 3);
        const stop = end < 0 ? line.length : end + 3;
        out.push(h("span", {class: "s"}, line.slice(m.index, stop)));
        if (end < 0) state.open = m[2];
        i = TOKEN.lastIndex = stop;
        if (end < 0) return out;
        continue;
      }
      const k = CLASSES.findIndex((c, j) => c && m[j] !== undefined);
      out.push(h("span", {class: CLASSES[k]}, m[0]));
      i = TOKEN.lastIndex;
    }
    out.push(line.slice(i));
    return out;
  }

  function source(text) {
    if (text === null || text === undefined) return h("p", {class: "muted"}, "No source: the Coder's reply had no usable code.");
    const state = {open: null};
    return h("div", {class: "code lines", id: "src-lines"}, text.split("\n").map((line, i) =>
      h("div", {class: "ln", "data-line": i + 1, id: "L" + (i + 1)}, h("span", {class: "no"}, String(i + 1)),
        h("span", {class: "tx"}, highlight(line, state)))));
  }

  function diff(lines) {
    if (!lines.length) return h("p", {class: "muted"}, "No parent to compare with (a fresh generation), or no change.");
    return h("div", {class: "code diff"}, lines.map(([kind, text]) => h("div", {class: "d-" + kind}, text)));
  }

  function kv(obj, keys) {
    return h("table", {class: "kv"}, keys.filter((k) => obj && obj[k] !== undefined && obj[k] !== null).map((k) =>
      h("tr", {}, h("th", {}, k), h("td", {}, typeof obj[k] === "object" ? JSON.stringify(obj[k]) : String(obj[k])))));
  }

  function stages(st) {
    const items = Object.entries(st || {}).filter(([k]) => !k.startsWith("total"));
    const total = (st || {}).total || items.reduce((a, [, v]) => a + v, 0) || 1;
    return h("div", {class: "stages"}, items.map(([k, v]) => h("div", {class: "stage"},
      h("span", {class: "stage-name"}, k), h("span", {class: "stage-bar"}, h("span", {class: "stage-fill",
        "data-w": Math.round(100 * v / total)})), h("span", {class: "num"}, `${v.toFixed(2)} s`))),
      h("div", {class: "muted"}, `total ${total.toFixed(2)} s`));
  }

  function timing(t) {
    if (!t || !t.measured) return h("p", {class: "muted"}, "Timing: " + ((t && t.reason) || "not measured"));
    const rows = Object.entries(t.speedups || {}).map(([b, sp]) => h("tr", {},
      h("td", {}, b), kiln.speedCell(sp), h("td", {}, sp.verdict),
      h("td", {class: "num"}, kiln.num(((t.baselines || {})[b] || {}).median_us) + " µs")));
    return h("div", {}, h("p", {}, `candidate median ${kiln.num((t.candidate || {}).median_us)} µs ` +
      `[${kiln.num((t.candidate || {}).ci_low_us)}–${kiln.num((t.candidate || {}).ci_high_us)}], method ${t.method}`),
      h("table", {class: "grid small"}, h("tr", {}, ["baseline", "speedup [95% CI]", "verdict", "baseline median"].map((x) => h("th", {}, x))), rows));
  }

  function check(d) {
    if (!d.checks.length) return h("p", {class: "muted"}, "Not checked yet.");
    const c = d.checks[d.checks.length - 1], r = c.record;
    const older = d.checks.slice(0, -1).map((o) => h("li", {}, `${o.file}: ${o.record.status}` +
      (o.cases.length ? ` (cases: ${o.cases.join(", ")})` : "")));
    return h("div", {class: "check"},
      h("p", {}, kiln.badge(r.status), ` ${r.correct ? "correct" : "not correct"} · ${c.file}` +
        (c.cases.length ? ` · stress cases: ${c.cases.join(", ")}` : "") + ` · device ${r.device} · seed ${c.seed}`),
      h("h4", {}, "Reasons"), h("ul", {}, (r.reasons || []).map((x) => h("li", {}, linkify(x)))),
      r.compile && r.compile.errors && r.compile.errors.length ? [h("h4", {}, "Compile errors"), pre(r.compile.errors.join("\n"), "err")] : null,
      r.stderr_tail ? [h("h4", {}, "stderr (tail)"), pre(r.stderr_tail, "err")] : null,
      h("h4", {}, "Per-stage times"), stages(r.stages_s),
      h("h4", {}, "Timing"), timing(r.timing),
      r.correctness ? [h("h4", {}, "Correctness"), kv(r.correctness, ["passed", "n_trials", "n_passed", "n_planned", "atol", "rtol", "first_failure"])] : null,
      older.length ? [h("h4", {}, "Earlier checks"), h("ul", {}, older)] : null);
  }

  // NaN and inf are written to JSON as null by the check record
  const val = (v) => typeof v === "number" ? v.toPrecision(6) : v === null || v === undefined ? "NaN/inf" : String(v);

  function mismatchTable(ms) {
    if (!ms.length) return h("p", {class: "muted"}, "Every trial passed.");
    return h("table", {class: "grid small mismatch"}, h("tr", {}, ["case", "inputs", "trial", "phase", "output", "reason",
      "mismatched", "positions (index: expected → actual)"].map((x) => h("th", {}, x))),
    ms.map((m) => h("tr", {}, h("td", {}, m.case), h("td", {}, m.distribution), h("td", {}, String(m.trial)),
      h("td", {}, m.phase), h("td", {}, m.output || "—"), h("td", {}, m.reason || (m.error ? "error" : "—")),
      h("td", {class: "num"}, m.n_total ? `${m.n_mismatch} / ${m.n_total}` : "—"),
      h("td", {}, m.error ? linkify(m.error) : m.first.map((f) => h("div", {class: "pos"},
        `[${(f.index || []).join(", ")}]: ${val(f.expected)} → ${val(f.actual)}`))))));
  }

  function mismatches(d) {
    const el = h("div", {id: "heatmap"});
    kiln.heatmap.draw(el, d.mismatches);
    return h("div", {}, h("h4", {}, "Where the mismatches fall"), el, h("h4", {}, "Failing trials"), mismatchTable(d.mismatches));
  }

  function integrity(d) {
    const r = d.checks.length ? d.checks[d.checks.length - 1].record.integrity : null;
    if (!r) return h("p", {class: "muted"}, "No integrity record (the check stopped before it).");
    const f = r.findings || [];
    return h("div", {},
      f.length ? h("table", {class: "grid small"}, h("tr", {}, ["rule", "severity", "evidence", "line"].map((x) => h("th", {}, x))),
        f.map((x) => h("tr", {class: "sev-" + x.severity}, h("td", {}, x.rule), h("td", {}, x.severity), h("td", {}, x.evidence),
          h("td", {}, x.line ? h("a", {href: "#L" + x.line, on: {click: (e) => { e.preventDefault(); gotoLine(x.line); }}}, String(x.line)) : "—"))))
        : h("p", {}, "No findings."),
      r.accounting ? [h("h4", {}, "Operator and kernel accounting"), kv(r.accounting, ["own_kernels", "library_kernels", "compute_ops", "own_time_share", "decoy_kernels", "method"])] : null,
      r.physics ? [h("h4", {}, "Physics (roofline floor)"), kv(r.physics, ["bytes_moved", "flops", "floor_us", "measured_us", "pct_of_floor", "bound", "peak_gbps", "peak_tflops", "peak_source"])] : null,
      r.degenerate ? [h("h4", {}, "Degenerate problem"), kv(r.degenerate, ["degenerate", "reasons"])] : null,
      r.timing ? [h("h4", {}, "Timing integrity"), kv(r.timing, ["wall_over_event", "timed_outputs_checked", "timed_outputs_failed", "distinct_inputs"])] : null);
  }

  function rooflinePoint(d) {
    const r = d.checks.length ? d.checks[d.checks.length - 1].record : null;
    const ph = r && r.integrity && r.integrity.physics;
    if (!ph || !ph.measured_us || !ph.bytes_moved) return null;
    const ai = (ph.flops || 0) / ph.bytes_moved, gbps = ph.bytes_moved / ph.measured_us / 1e3;
    return h("p", {class: "roofline-point"}, `Roofline point: ${kiln.num(ai, 3)} FLOP/byte, ` +
      `${kiln.num((ph.flops || 0) / ph.measured_us / 1e3, 1)} GFLOP/s, ${kiln.num(gbps, 1)} GB/s; ` +
      `${kiln.num(ph.pct_of_floor, 1)}% of the ${ph.bound || ""} floor (${kiln.num(ph.floor_us, 3)} µs; peaks from ${ph.peak_source || "?"}).`);
  }

  function profile(d) {
    const p = d.profile, rep = p.report;
    return h("div", {}, rooflinePoint(d),
      p.skipped ? h("p", {class: "muted"}, "Not profiled: " + p.skipped) : null,
      p.digest ? [h("h4", {}, "Digest (what the Judge read)"), pre(p.digest)] : null,
      rep && rep.kernels ? [h("h4", {}, `Kernels (${rep.source})`), h("table", {class: "grid small"},
        h("tr", {}, ["kernel", "µs", "bound", "roofline %", "memory SOL %", "compute SOL %", "occupancy %", "findings"].map((x) => h("th", {}, x))),
        rep.kernels.map((k) => h("tr", {}, h("td", {}, k.name), h("td", {class: "num"}, kiln.num(k.duration_us)), h("td", {}, k.bound),
          h("td", {class: "num"}, kiln.num(k.roofline_pct, 0)), h("td", {class: "num"}, kiln.num(k.memory_sol_pct, 0)),
          h("td", {class: "num"}, kiln.num(k.compute_sol_pct, 0)), h("td", {class: "num"}, kiln.num(k.achieved_occupancy_pct, 0)),
          h("td", {}, (k.findings || []).map((f) => h("div", {}, f.message))))))] : null,
      !p.skipped && !p.digest && !rep ? h("p", {class: "muted"}, "No profile recorded for this candidate.") : null);
  }

  function decision(x) {
    return h("div", {class: "decision"}, kv(x, ["mode", "next", "diagnosis", "bottleneck", "evidence", "plan", "stop_reason", "error"]),
      x.overridden ? h("p", {class: "override"}, "Overridden by the graph: " + x.overridden) : null);
  }

  function judge(d) {
    const j = d.judge;
    return h("div", {},
      j.asked.length ? j.asked.map((a) => h("div", {}, h("h4", {}, `Judge's decision (${a.file}, on a ${a.check_status} check)`), decision(a.decision || {})))
        : h("p", {class: "muted"}, "The Judge was not asked about this candidate (hard rules decided, or it was not on the frontier)."),
      j.final.some((x) => x.overridden) ? [h("h4", {}, "After the hard rules"), j.final.filter((x) => x.overridden).map(decision)]
        : j.final.length ? h("p", {class: "muted"}, "The hard rules kept the Judge's decision.") : null,
      j.routes.length ? [h("h4", {}, "Routes"), h("ul", {}, j.routes.map((r) => h("li", {}, `→ ${r.goto} (Judge said ${r.judge_next})`)))] : null);
  }

  function proposer(d) {
    const rows = d.proposer;
    const checked = d.checks.map((c) => {
      const failed = new Set(((c.record.correctness || {}).trials || []).filter((t) => !t.passed && t.case !== "problem").map((t) => t.case));
      return c.cases.length ? h("li", {}, `${c.file}: ` , c.cases.map((n) => h("span", {class: failed.has(n) ? "case-fail" : "case-ok"}, `${n} ${failed.has(n) ? "failed" : "passed"} `))) : null;
    }).filter(Boolean);
    return h("div", {},
      rows.length ? h("table", {class: "grid small"}, h("tr", {}, ["case", "valid", "reason", "rationale"].map((x) => h("th", {}, x))),
        rows.map((c) => h("tr", {}, h("td", {}, c.name), h("td", {}, c.valid === true ? "yes" : c.valid === false ? "no" : "?"),
          h("td", {}, c.reason || ""), h("td", {}, c.rationale || ""))))
        : h("p", {class: "muted"}, "The Proposer wrote no cases against this candidate."),
      h("h4", {}, "Stress cases this candidate ran"), checked.length ? h("ul", {}, checked) : h("p", {class: "muted"}, "None."));
  }

  function prompt(d) {
    const c = d.coder;
    if (!c) return h("p", {class: "muted"}, "No Coder call found for this candidate.");
    return h("div", {},
      h("p", {class: "muted"}, `${c.file} · ${c.usage ? `${c.usage.model || ""} ${c.usage.input_tokens} in / ${c.usage.output_tokens} out tokens` + (c.usage.cost_usd !== null ? `, ${kiln.usd(c.usage.cost_usd)}` : "") : ""}`),
      h("h4", {}, "Prompt"), c.prompt ? pre(c.prompt) : [h("p", {class: "muted"}, "This backend has no prompt text (built-in or scripted); its request:"), pre(JSON.stringify(c.request, null, 2))],
      h("h4", {}, "Reply"), pre(c.raw || c.error || "(empty)"));
  }

  const TABS = [["source", "Source"], ["diff", "Diff vs parent"], ["check", "Check"], ["mismatch", "Mismatches"],
    ["integrity", "Integrity"], ["profile", "Profile"], ["judge", "Judge"], ["proposer", "Proposer"], ["prompt", "Prompt & reply"]];
  let current = "source";

  function showTab(name) {
    current = name;
    document.querySelectorAll("#node .tab").forEach((t) => t.classList.toggle("active", t.dataset.tab === name));
    document.querySelectorAll("#node .pane").forEach((p) => { p.hidden = p.dataset.tab !== name; });
  }

  function copyButton(text) {
    const b = h("button", {class: "btn", type: "button"}, "Copy");
    b.addEventListener("click", async () => {
      try { await navigator.clipboard.writeText(text); b.textContent = "Copied"; }
      catch (_e) { const r = document.createRange(); r.selectNodeContents(b.previousSibling); getSelection().removeAllRanges(); getSelection().addRange(r); b.textContent = "Selected"; }
    });
    return b;
  }

  function render(el, d, onParent) {
    const panes = {source: () => source(d.source), diff: () => diff(d.diff), check: () => check(d), mismatch: () => mismatches(d),
      integrity: () => integrity(d), profile: () => profile(d), judge: () => judge(d), proposer: () => proposer(d), prompt: () => prompt(d)};
    const last = d.checks.length ? d.checks[d.checks.length - 1].record : null;
    fill(el,
      h("div", {class: "card-head"}, h("h2", {}, `Candidate ${d.id}`),
        h("span", {}, kiln.badge(last ? last.status : (d.source ? "pending" : "no_code")), ` mode ${d.mode}`,
          d.parent ? [" · parent ", h("a", {href: "#", on: {click: (e) => { e.preventDefault(); onParent(d.parent); }}}, d.parent)] : " · from the problem")),
      d.error ? h("p", {class: "err"}, "Coder: " + d.error) : null,
      d.repro ? h("div", {class: "repro"}, h("code", {id: "repro"}, d.repro), copyButton(d.repro)) : null,
      h("div", {class: "tabs", role: "tablist"}, TABS.map(([k, label]) => h("button", {class: "tab", type: "button", "data-tab": k,
        role: "tab", on: {click: () => showTab(k)}}, label))),
      TABS.map(([k]) => h("div", {class: "pane", "data-tab": k}, panes[k]())));
    el.querySelectorAll(".stage-fill").forEach((f) => { f.style.width = f.dataset.w + "%"; });
    showTab(current);
  }

  kiln.node = {render, linkify, gotoLine, showTab};
})();
