// The history page: draws the embedded JSON (eval.history.page) into page.html's sections. It
// computes no statistic: every estimate and interval comes from the JSON. Texts from the store
// (systems, versions, notes, query and document ids) are always set as text, never as HTML.
(function () {
  "use strict";
  const payload = JSON.parse(document.getElementById("history-data").textContent);
  const P = payload.page;
  const FIGURES = payload.figures || {};
  const byId = new Map(P.points.map((p) => [p.id, p]));

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }
  const $ = (id) => document.getElementById(id);
  const fmt = (v) => (v === null || v === undefined ? "–" : Number(v).toFixed(3));
  const signed = (v) => (v > 0 ? "+" : "") + Number(v).toFixed(3);
  const name = (p) => `${p.system}@${p.version}`;
  const level = `${Math.round((1 - P.alpha) * 100)}%`;

  function drawHeader() {
    $("title").textContent = P.title;
    const systems = new Set(P.points.map((p) => p.system));
    $("subtitle").textContent = [
      `${P.points.length} evaluation${P.points.length === 1 ? "" : "s"} of ${systems.size} system${systems.size === 1 ? "" : "s"}`,
      `store ${P.store}`,
      `${level} intervals`,
      `made ${P.generated_at}`,
    ].join(" · ");
    $("trends-legend").textContent = `Each point: an evaluation's estimate with its ${level} interval ` +
      "(PPI++ where people judged some of its queries, otherwise a t interval over the labeler's " +
      "per-query values: the table below says which; squares mark PPI++). The x axis names each version and its evaluation's id (id:N, as the history commands take it).";
  }

  function drawTrends() {
    for (const metric of P.metrics) {
      const figure = el("figure", { "data-metric": metric });
      const holder = el("div", { class: "svg-holder" });
      holder.innerHTML = FIGURES[metric] || ""; // drawn by eval.history.page (matplotlib), not user text
      figure.append(holder);
      $("trend-figures").append(figure);
    }
  }

  function estimateCell(point, metric) {
    const e = point.estimates[metric];
    if (!e) return el("td", { class: "num muted", text: "–" });
    return el("td", { class: "num", title: e.method },
      el("span", { class: "est", text: fmt(e.estimate) }), " ",
      el("span", { class: "ci", text: `[${fmt(e.low)}, ${fmt(e.high)}]` }));
  }

  function drawEvaluations() {
    const table = $("evaluations-table");
    table.append(el("tr", {},
      el("th", { text: "A / B" }), el("th", { text: "id" }), el("th", { text: "system@version" }),
      el("th", { text: "when (UTC)" }), el("th", { text: "labeler" }), el("th", { class: "num", text: "queries" }),
      ...P.metrics.map((m) => el("th", { class: "num", text: m })), el("th", { text: "note" })));
    const ordered = [...P.points].sort((x, y) => (x.created_at < y.created_at ? 1 : -1));
    for (const p of ordered) {
      const label = p.report ? el("a", { href: p.report, text: name(p) }) : name(p);
      table.append(el("tr", { "data-id": p.id },
        el("td", { class: "pick" },
          el("input", { type: "radio", name: "pick-a", value: p.id, title: "compare as A", onchange: () => choose("a", p.id) }),
          el("input", { type: "radio", name: "pick-b", value: p.id, title: "compare as B", onchange: () => choose("b", p.id) })),
        el("td", { class: "num", text: `id:${p.id}` }), el("td", {}, label), el("td", { text: p.created_at }),
        el("td", { text: shortLabeler(p.labeler), title: p.labeler }), el("td", { class: "num", text: p.queries }),
        ...P.metrics.map((m) => estimateCell(p, m)), el("td", { class: "note-text", text: p.note || "" })));
    }
  }

  // "qrels:/long/path/qrels.tsv" as "qrels:qrels.tsv"; the whole spec is the cell's title.
  function shortLabeler(spec) {
    const [kind, ...rest] = spec.split(":");
    const path = rest.join(":");
    return path ? `${kind}:${path.split("/").filter(Boolean).pop() || path}` : spec;
  }

  function choose(side, id) {
    $(`${side}-select`).value = String(id);
    drawComparison();
  }

  function findPair(a, b) {
    for (const pair of P.pairs) {
      if (pair.a === a && pair.b === b) return { pair, flipped: false };
      if (pair.a === b && pair.b === a) return { pair, flipped: true };
    }
    return null;
  }

  const FLIPPED = { "A better": "A worse", "A worse": "A better" };

  function flipMetric(m) {
    return { ...m, estimate: -m.estimate, low: -m.high, high: -m.low, verdict: FLIPPED[m.verdict] || m.verdict,
      moved: m.moved.map((q) => ({ ...q, a: q.b, b: q.a, diff: -q.diff, entered: q.left, left: q.entered })) };
  }

  // The verdict eval.history.page computed (EvaluationComparison.verdict): only the primary
  // metric is called better or worse; the legend under the table says by what rule.
  function verdict(m) {
    const kind = { "A better": "better", "A worse": "worse", marginal: "marginal" }[m.verdict] || "unclear";
    return el("span", { class: `verdict ${kind}`, text: m.verdict });
  }

  function hitList(hits) {
    return el("span", { class: "hits" }, hits.map((h, i) =>
      `${i ? ", " : ""}${h.doc_id}${h.label === null || h.label === undefined ? "" : ` (${h.label})`}`).join(""));
  }

  function drawComparison() {
    const a = Number($("a-select").value), b = Number($("b-select").value);
    for (const row of document.querySelectorAll("#evaluations-table tr[data-id]")) {
      const id = Number(row.dataset.id);
      row.classList.toggle("chosen-a", id === a);
      row.classList.toggle("chosen-b", id === b);
      row.querySelector('input[name="pick-a"]').checked = id === a;
      row.querySelector('input[name="pick-b"]').checked = id === b;
    }
    const table = $("compare-table"), moved = $("moved-table"), summary = $("compare-summary");
    table.replaceChildren(); moved.replaceChildren(); summary.replaceChildren();
    $("compare-legend").textContent = "";
    summary.className = "";
    if (a === b) { summary.textContent = "Pick two different evaluations."; return; }
    const A = byId.get(a), B = byId.get(b);
    const found = findPair(a, b);
    if (!found) {
      summary.textContent = `This page holds no comparison of id:${a} and id:${b} (it keeps the latest ` +
        `evaluations' pairs); run: relevance-grader history compare id:${a} id:${b} --store STORE`;
      return;
    }
    if (found.pair.refused) {
      summary.className = "refused";
      summary.textContent = found.pair.refused;
      return;
    }
    summary.textContent = `A = ${name(A)} (id:${a}) against B = ${name(B)} (id:${b}): A − B over the queries both evaluated, ${level} intervals.`;
    table.append(el("tr", {}, el("th", { text: "metric" }), el("th", { class: "num", text: "A − B" }),
      el("th", { class: "num", text: `${level} interval` }), el("th", { text: "" }),
      el("th", { class: "num", text: "queries" }), el("th", { text: "method" })));
    for (const [metric, raw] of Object.entries(found.pair.metrics)) {
      const m = found.flipped ? flipMetric(raw) : raw;
      table.append(el("tr", { "data-metric": metric }, el("td", { text: metric }),
        el("td", { class: "num est", text: signed(m.estimate) }),
        el("td", { class: "num ci", text: `[${fmt(m.low)}, ${fmt(m.high)}]` }),
        el("td", {}, verdict(m)), el("td", { class: "num", text: m.queries }), el("td", { class: "small", text: m.method })));
    }
    $("compare-legend").textContent = found.pair.legend;
    const metric = $("compare-metric").value;
    const chosen = found.pair.metrics[metric];
    $("moved-title").textContent = `Queries that moved most in ${metric}`;
    if (!chosen) return;
    const m = found.flipped ? flipMetric(chosen) : chosen;
    moved.append(el("tr", {}, el("th", { text: "query" }), el("th", { class: "num", text: "A" }),
      el("th", { class: "num", text: "B" }), el("th", { class: "num", text: "A − B" }),
      el("th", { text: "entered A's top k (label)" }), el("th", { text: "left it (label in B)" })));
    for (const q of m.moved) {
      moved.append(el("tr", {}, el("td", { text: q.qid }), el("td", { class: "num", text: fmt(q.a) }),
        el("td", { class: "num", text: fmt(q.b) }), el("td", { class: "num est", text: signed(q.diff) }),
        el("td", {}, hitList(q.entered)), el("td", {}, hitList(q.left))));
    }
  }

  function drawControls() {
    const ordered = [...P.points].sort((x, y) => (x.created_at < y.created_at ? 1 : -1));
    for (const side of ["a", "b"]) {
      for (const p of ordered) $(`${side}-select`).append(el("option", { value: p.id, text: `id:${p.id} ${name(p)} (${p.created_at})` }));
      $(`${side}-select`).addEventListener("change", drawComparison);
    }
    for (const m of P.metrics) $("compare-metric").append(el("option", { value: m, text: m }));
    $("compare-metric").addEventListener("change", drawComparison);
    // Default: the latest evaluation against the one before it of the same system.
    const latest = ordered[0];
    const previous = latest && ordered.find((p) => p.id !== latest.id && p.system === latest.system);
    if (latest) $("a-select").value = String(latest.id);
    if (previous || ordered[1]) $("b-select").value = String((previous || ordered[1]).id);
  }

  drawHeader();
  drawTrends();
  drawEvaluations();
  drawControls();
  if (P.points.length > 1) drawComparison();
  document.body.dataset.ready = "true";
})();
