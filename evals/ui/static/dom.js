// kiln ui: DOM helpers shared by every page. Recorded text (sources, errors, prompts, names) only
// ever becomes text nodes or attribute values through these helpers: nothing is parsed as HTML.
"use strict";
const kiln = window.kiln = {};

kiln.SVG_NS = "http://www.w3.org/2000/svg";

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "on") { for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn); }
    else if (k === "text") el.textContent = String(v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// h("a", {href: "/x", class: "y"}, "text", childNode, ...)
kiln.h = (tag, attrs, ...children) => build(document.createElement(tag), attrs, children);
kiln.s = (tag, attrs, ...children) => build(document.createElementNS(kiln.SVG_NS, tag), attrs, children);

kiln.clear = (el) => { while (el.firstChild) el.removeChild(el.firstChild); return el; };
kiln.fill = (el, ...children) => build(kiln.clear(el), {}, children);
// A name that may wrap after its underscores (`level1/50_conv_standard_2D__square_input__square_kernel`).
kiln.breakable = (name) => String(name).split("_").flatMap((part, i) => i ? [kiln.h("wbr", {}), "_" + part] : [part]);

kiln.$ = (sel, root) => (root || document).querySelector(sel);

kiln.data = () => JSON.parse(document.getElementById("kiln-data").textContent);

kiln.getJSON = async (url) => {
  const res = await fetch(url, {credentials: "same-origin", cache: "no-store"});
  if (!res.ok) throw new Error(url + ": " + res.status);
  return res.json();
};

kiln.postJSON = async (url, body) => {
  const csrf = document.querySelector('meta[name="kiln-csrf"]').content;
  const res = await fetch(url, {method: "POST", credentials: "same-origin",
    headers: {"content-type": "application/json", "x-kiln-csrf": csrf}, body: JSON.stringify(body)});
  const out = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(out.error || String(res.status));
  return out;
};

kiln.controlOn = () => document.querySelector('meta[name="kiln-control"]').content === "on";

// Live updates: an EventSource on `url`; `refresh` runs on each change (never two at once).
kiln.live = (url, refresh) => {
  const dot = document.getElementById("live");
  let busy = false, again = false;
  const run = async () => {
    if (busy) { again = true; return; }
    busy = true;
    try { await refresh(); dot.className = "live on"; }
    catch (err) { dot.className = "live off"; dot.title = String(err); }
    busy = false;
    if (again) { again = false; run(); }
  };
  const es = new EventSource(url);
  es.addEventListener("change", run);
  es.onopen = () => { dot.className = "live on"; };
  es.onerror = () => { dot.className = "live off"; };
  return es;
};

// ---- formatting
kiln.num = (v, digits = 2) => (v === null || v === undefined || Number.isNaN(v)) ? "—" : Number(v).toFixed(digits);
kiln.speed = (sp) => {
  if (!sp || sp.value === null || sp.value === undefined) return "—";
  const ci = (sp.ci_low !== null && sp.ci_low !== undefined)
    ? ` [${kiln.num(sp.ci_low)}–${kiln.num(sp.ci_high)}]` : (sp.geomean ? " geomean" : "");
  return `${kiln.num(sp.value)}x${ci}`;
};
kiln.speedCell = (sp) => kiln.h("td", {class: "num" + (sp && sp.verdict ? " v-" + sp.verdict : ""),
  "data-sort": sp && sp.value !== null && sp.value !== undefined ? sp.value : -1}, kiln.speed(sp));
kiln.tokens = (n) => n === null || n === undefined ? "—" : n >= 1e6 ? (n / 1e6).toFixed(2) + "M"
  : n >= 1e3 ? (n / 1e3).toFixed(1) + "k" : String(n);
kiln.usd = (v) => v === null || v === undefined ? "—" : "$" + Number(v).toFixed(v < 1 ? 4 : 2);
kiln.secs = (s) => {
  if (s === null || s === undefined) return "—";
  if (s < 60) return Math.round(s) + " s";
  if (s < 3600) return Math.round(s / 60) + " min";
  if (s < 86400) return (s / 3600).toFixed(1) + " h";
  return (s / 86400).toFixed(1) + " d";
};
kiln.age = (t) => t ? kiln.secs(Date.now() / 1000 - t) + " ago" : "—";
kiln.pct = (v) => v === null || v === undefined ? "—" : (100 * v).toFixed(1) + "%";

kiln.STATUS = ["ok", "incorrect", "compile_error", "crashed", "timeout", "rejected", "pending", "no_code",
  "unsupported", "error"];
kiln.badge = (status) => kiln.h("span", {class: "badge st-" + String(status || "unknown").replace(/[^a-z_]/g, "")},
  String(status || "unknown").replace("_", " "));

kiln.crumbs = (...parts) => {
  const nav = document.getElementById("crumbs");
  kiln.fill(nav, parts.map((p, i) => [i ? kiln.h("span", {class: "sep"}, "/") : null,
    p.href ? kiln.h("a", {href: p.href}, p.text) : kiln.h("span", {}, p.text)]));
};

kiln.runHref = (id) => "/run/" + id.split("/").map(encodeURIComponent).join("/");
kiln.batchHref = (id) => "/batch/" + id.split("/").map(encodeURIComponent).join("/");
kiln.fileHref = (id) => "/file/" + id.split("/").map(encodeURIComponent).join("/");

// A sortable table: columns [{key, label, cell(row) -> td, sort(row) -> value}]
// A sortable table; `detail(row)` (optional) gives a full-width line drawn under a row (its reasons),
// so long text never squeezes into a narrow column or pushes the table sideways.
kiln.table = (table, columns, rows, state, detail) => {
  state = state || {key: null, dir: 1};
  const head = kiln.h("tr", {}, columns.map((c) => kiln.h("th", {
    class: state.key === c.key ? (state.dir > 0 ? "sorted asc" : "sorted desc") : "", "data-key": c.key,
    on: {click: () => { state.dir = state.key === c.key ? -state.dir : 1; state.key = c.key;
      kiln.table(table, columns, rows, state, detail); }}}, c.label)));
  const col = columns.find((c) => c.key === state.key);
  const sorted = col ? [...rows].sort((a, b) => {
    const x = col.sort(a), y = col.sort(b);
    return (x < y ? -1 : x > y ? 1 : 0) * state.dir;
  }) : rows;
  kiln.fill(table.tHead, head);
  const body = kiln.clear(table.tBodies[0]);
  const frag = document.createDocumentFragment();
  for (const r of sorted) {
    const more = detail ? detail(r) : null;
    frag.appendChild(kiln.h("tr", {class: more ? "row has-detail" : "row"}, columns.map((c) => c.cell(r))));
    if (more) frag.appendChild(kiln.h("tr", {class: "detail"}, kiln.h("td", {colspan: columns.length}, more)));
  }
  body.appendChild(frag);
  table.setAttribute("data-rows", String(sorted.length));
  return state;
};
