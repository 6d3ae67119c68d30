// The live page: polls /api/board once a second and draws what the controller recorded.
"use strict";

const token = new URLSearchParams(location.search).get("token");
const tokenParam = token ? `&token=${encodeURIComponent(token)}` : "";
const COLOURS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d",
                 "#4d7c0f", "#7c3aed", "#0f766e", "#b45309", "#475569"];
const MARK_COLOURS = {step: "#94a3b8", pause: "#cbd5e1", member_started: "#16a34a",
  members_up: "#16a34a", member_restarted: "#16a34a", member_stopped: "#b91c1c",
  member_killed: "#b91c1c", member_lost: "#b91c1c", member_draining: "#ea580c",
  scale_decision: "#9333ea",
  scale_failed: "#b91c1c", fault: "#dc2626", fault_cleared: "#15803d", fault_failed: "#b91c1c",
  senders_stop: "#475569", drained: "#475569", error: "#b91c1c", probe: "#0891b2",
  capacity: "#0891b2", exit: "#475569", accounting: "#475569"};

const view = {runId: null, cursor: {ticks: 0, members: 0, events: 0}, ticks: {}, columns: [],
  members: new Map(), quotas: new Map(), events: [], phases: [], steps: [], charts: {},
  memberKey: "", offset: null, points: 0, rateTop: 1,
  terms: {unit: "msg/s", each: "msg", counted: "messages", senders: "senders",
          receivers: "receivers", queues: "queues"}};
window.surgeView = view;
// what the run's rates count (round trips/s in request/reply) and what its clients are called
const unit = () => view.terms.unit;

function reset(runId) {
  Object.values(view.charts).forEach(c => c.destroy());
  Object.assign(view, {runId, cursor: {ticks: 0, members: 0, events: 0}, ticks: {}, columns: [],
    members: new Map(), quotas: new Map(), events: [], phases: [], steps: [], charts: {},
    memberKey: "", offset: null, points: 0, rateTop: 1});
}

// The rate chart's top: the busiest ordinary second (this quantile of the measured rates) or
// the highest target, whichever is higher, with this margin; a second above it is marked at
// the top edge with its value rather than rescaling the chart for every other second.
const RATE_QUANTILE = 0.95, RATE_MARGIN = 1.2, RATE_HEADROOM = 1.05;

/** The top (msg/s) of the rate chart's scale for the measured rates and the targets. */
function rateCeiling(measured, targets) {
  const known = measured.filter(v => v !== null && v !== undefined && Number.isFinite(v))
    .sort((a, b) => a - b);
  const highestTarget = Math.max(0, ...targets.filter(v => Number.isFinite(v)));
  if (!known.length) return Math.max(1, highestTarget * RATE_HEADROOM);
  const at = (known.length - 1) * RATE_QUANTILE, below = Math.floor(at);
  const ordinary = known[below] + (known[Math.min(below + 1, known.length - 1)] - known[below]) * (at - below);
  const limit = Math.max(ordinary, highestTarget) * RATE_MARGIN;
  const highest = Math.max(known[known.length - 1], highestTarget);
  return Math.max(1, highest <= limit ? highest * RATE_HEADROOM : limit);
}
window.surgeScale = {rateCeiling};

const lastKnown = values => {
  for (let i = values.length - 1; i >= 0; i--) if (values[i] !== null && values[i] !== undefined) return values[i];
  return null;
};
const fmt = (v, digits = 0) => v === null || v === undefined || Number.isNaN(v) ? "–"
  : Number(v).toLocaleString("en", {maximumFractionDigits: digits, minimumFractionDigits: digits});
const text = (id, value) => { document.getElementById(id).textContent = value; };

// What the broker said it is, beside the title; an emulator in warning colours, since its CPU
// and rates are the emulator's, not the product's.
function brokerBadge(run) {
  const badge = document.getElementById("broker");
  badge.hidden = !run.broker;
  badge.textContent = run.broker || "";
  badge.classList.toggle("emulated", Boolean(run.emulated));
}

function markersPlugin() {
  return {hooks: {draw: [u => {
    const ctx = u.ctx, {left, top, width, height} = u.bbox;
    const marks = view.phases.filter(p => p.index > 0)
      .map(p => ({x: p.start_s, colour: MARK_COLOURS.step, label: `step ${p.index}`}))
      .concat(view.events.filter(e => e.kind !== "step" && view.offset !== null)
        .map(e => ({x: e.t - view.offset, colour: MARK_COLOURS[e.kind] || "#64748b",
                    label: e.kind.replace("_", " ")})));
    ctx.save();
    ctx.font = `${10 * devicePixelRatio}px system-ui`;
    for (const m of marks) {
      const x = u.valToPos(m.x, "x", true);
      if (x < left || x > left + width) continue;
      ctx.strokeStyle = m.colour; ctx.fillStyle = m.colour;
      ctx.setLineDash([4 * devicePixelRatio, 3 * devicePixelRatio]);
      ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + height); ctx.stroke();
      ctx.fillText(m.label, x + 3 * devicePixelRatio, top + 10 * devicePixelRatio);
    }
    ctx.restore();
  }]}};
}

// A legend shows the hovered second's values, and the last known ones when nothing is hovered.
const legendValue = (digits, unit = "") => (u, v, si, idx) => {
  const shown = idx === null || idx === undefined ? lastKnown(u.data[si]) : v;
  return shown === null ? "–" : `${fmt(shown, digits)}${unit}`;
};

function chart(id, series, yLabel, log = false, extra = {}) {
  const element = document.getElementById(id);
  const options = {
    width: element.clientWidth || 560, height: 220, plugins: [markersPlugin(), ...(extra.plugins || [])],
    scales: {x: {time: false}, y: log ? {distr: 3} : extra.range ? {range: extra.range} : {}},
    axes: [{label: "seconds since the load started"}, {label: yLabel, size: 60}],
    series: [{label: "s", value: legendValue(0, " s")}].concat(series.map((s, i) => ({
      label: s.label, stroke: s.colour || COLOURS[i % COLOURS.length], width: 1.5,
      dash: s.dash, spanGaps: false, value: s.value || legendValue(s.digits || 0),
      ...(s.hidden ? {paths: () => null, points: {show: false}} : {})}))),
  };
  element.innerHTML = "";
  return new uPlot(options, [[]].concat(series.map(() => [])), element);
}

const CLIPPED_COLOUR = "#b91c1c";

/** The rate chart's seconds above its scale: the higher of published and consumed, else null. */
function clippedRates(sent, received, top) {
  return sent.map((v, i) => {
    const highest = Math.max(v ?? -Infinity, received[i] ?? -Infinity);
    return highest > top ? highest : null;
  });
}

// the clipped seconds' legend: the hovered one's rate, or how many and the highest
function clippedValue(u, v, si, idx) {
  if (idx !== null && idx !== undefined) return v === null || v === undefined ? "–" : `${fmt(v)} ${unit()}`;
  const clipped = u.data[si].filter(x => x !== null);
  if (!clipped.length) return "none";
  return `${clipped.length} s, up to ${fmt(Math.max(...clipped))} ${unit()}`;
}

// a mark at the top edge over each second above the scale, with its rate
function clippedPlugin() {
  return {hooks: {draw: [u => {
    const values = u.data[4] || [], ctx = u.ctx, {top} = u.bbox, px = devicePixelRatio;
    ctx.save();
    ctx.fillStyle = CLIPPED_COLOUR;
    ctx.font = `${10 * px}px system-ui`;
    values.forEach((v, i) => {
      if (v === null) return;
      const x = u.valToPos(u.data[0][i], "x", true);
      ctx.beginPath(); ctx.moveTo(x - 5 * px, top); ctx.lineTo(x + 5 * px, top); ctx.lineTo(x, top + 7 * px);
      ctx.closePath(); ctx.fill();
      ctx.fillText(`${fmt(v)} ↑`, x + 6 * px, top + 18 * px);
    });
    ctx.restore();
  }]}};
}

function column(name) { return view.ticks[name] || []; }

function ensureCharts() {
  const c = view.charts;
  if (!c.rates) {
    c.rates = chart("chart-rates", [{label: "target", colour: "#94a3b8", dash: [6, 4]},
      {label: "published", colour: "#2563eb"}, {label: "consumed", colour: "#16a34a"},
      {label: "above the scale", colour: CLIPPED_COLOUR, hidden: true, value: clippedValue}], unit(),
      false, {range: () => [0, view.rateTop], plugins: [clippedPlugin()]});
    c.depth = chart("chart-depth", [{label: "queue depth", colour: "#ea580c"},
      {label: "in flight", colour: "#9333ea"}], "messages");
    c.latency = chart("chart-latency", [{label: "p50", colour: "#2563eb", digits: 1},
      {label: "p99", colour: "#dc2626", digits: 1}], "ms", true);
    c.errors = chart("chart-errors", [{label: "errors", colour: "#b91c1c"},
      {label: "reconnects", colour: "#ea580c"}], "count");
  }
  const key = [...view.members.keys()].join(",");
  if (key !== view.memberKey) {
    if (c.cpu) c.cpu.destroy();
    const names = [...view.members.keys()];
    const series = names.map((name, i) => ({label: name.split("@")[0], colour: COLOURS[i], digits: 1}))
      .concat(names.map((name, i) => ({label: `${name.split("@")[0]} quota`, colour: COLOURS[i], dash: [3, 3]})));
    c.cpu = chart("chart-cpu", series, "% of a core");
    view.memberKey = key;
  }
}

function absorb(doc) {
  if (doc.ticks.length) {
    if (!view.columns.length) view.columns = doc.tick_columns;
    for (const row of doc.ticks) view.columns.forEach((name, i) => (view.ticks[name] ||= []).push(row[i]));
    if (view.offset === null) view.offset = column("t")[0] - column("elapsed_s")[0];
  }
  const mc = doc.member_columns;
  for (const row of doc.members) {
    const r = Object.fromEntries(mc.map((name, i) => [name, row[i]]));
    if (!view.members.has(r.member)) view.members.set(r.member, new Map());
    view.members.get(r.member).set(r.elapsed_s, r.running ? r.cpu_percent : null);
    if (r.cpu_quota_cores) view.quotas.set(r.member, r.cpu_quota_cores * 100);
  }
  view.events.push(...doc.events);
  view.phases = doc.phases;
  view.steps = doc.steps;
  view.cursor = doc.next;
}

function redraw() {
  ensureCharts();
  const x = column("elapsed_s");
  const c = view.charts;
  const sent = column("send_rate"), received = column("receive_rate");
  view.rateTop = rateCeiling(sent.concat(received), column("target_rate"));
  c.rates.setData([x, column("target_rate"), sent, received, clippedRates(sent, received, view.rateTop)]);
  c.depth.setData([x, column("queue_depth"), column("backlog")]);
  c.latency.setData([x, column("latency_p50_ms").map(v => v > 0 ? v : null),
                     column("latency_p99_ms").map(v => v > 0 ? v : null)]);
  c.errors.setData([x, column("errors"), column("reconnects")]);
  const names = [...view.members.keys()];
  c.cpu.setData([x].concat(names.map(n => x.map(t => view.members.get(n).get(t) ?? null)),
                           names.map(n => x.map(() => view.quotas.get(n) ?? null))));
  view.points = x.length;
}

const ratioClass = ratio => ratio === null ? "" : ratio >= 0.98 ? "good" : ratio >= 0.9 ? "warn" : "bad";
const lastOf = name => { const values = column(name); return values[values.length - 1]; };

// A finished run's figures: its final step's, as the step table has them, and its balance.
function finalFigures(doc) {
  const run = doc.run, step = view.steps[view.steps.length - 1];
  const ratio = step.achieved_rate === null ? null : step.target_rate ? step.achieved_rate / step.target_rate : 1;
  const accounting = doc.accounting;
  const verdict = !accounting ? "not accounted" : accounting.balanced ? "balanced"
    : accounting.unknown !== null && accounting.unknown !== undefined ? `unknown ${fmt(accounting.unknown)} msgs`
    : `lost ${accounting.lost === null ? "?" : fmt(accounting.lost)} msgs`;
  return [
    ["state", run.label, run.outcome === "completed" ? "" : "bad"],
    ["elapsed / planned", `${fmt(lastOf("elapsed_s"))} / ${fmt(run.planned_s)} s`],
    [`final step (${step.label || step.step}) target`, step.target_rate ? `${fmt(step.target_rate)} ${unit()}` : "max"],
    ["final achieved end to end", step.achieved_rate === null ? "–"
      : `${fmt(step.achieved_rate)} ${unit()}` + (step.target_rate ? ` (${fmt(ratio * 100, 1)} %)` : ""),
      step.target_rate ? ratioClass(ratio) : ""],
    ["sent / received", `${fmt(step.sent_rate)} / ${fmt(step.received_rate)} ${unit()}`],
    [`${view.terms.senders} / ${view.terms.receivers} / ${view.terms.queues}`,
      `${fmt(step.senders)} / ${fmt(step.receivers)} / ${fmt(step.queues)}`],
    [`CPU us/${view.terms.each}: broker / generator`,
      `${fmt(step.broker_us_per_msg, 1)} / ${fmt(step.generator_us_per_msg, 1)}`],
    ["final p50 / p99", `${fmt(step.p50_ms, 1)} / ${fmt(step.p99_ms, 1)} ms`],
    ["members", fmt(step.members)],
    ["errors / reconnects", `${fmt(lastOf("errors"))} / ${fmt(lastOf("reconnects"))}`],
    ["accounting", verdict, !accounting ? "" : accounting.balanced ? "good" : "bad"],
  ];
}

// The run's table sections first once it has ended: its result is what a reader comes for.
function orderSections(finished) {
  const charts = document.getElementById("charts");
  const first = ["steps-section", "accounting-section"].map(id => document.getElementById(id));
  if (finished && charts.previousElementSibling !== first[1]) first.forEach(s => charts.before(s));
}

function figures(doc) {
  const finished = doc.run.outcome !== "running" && view.steps.length > 0;
  orderSections(finished);
  showFigures(finished ? finalFigures(doc) : liveFigures(doc));
}

function showFigures(items) {
  document.getElementById("now").innerHTML = items.map(([name, value, c]) =>
    `<div><span>${name}</span><b class="${c || ""}">${value}</b></div>`).join("");
}

// A running run's figures: this second's.
function liveFigures(doc) {
  const last = lastOf;
  const run = doc.run;
  // end to end as the step table takes it: the lower of the send and receive rates (a
  // receive rate counts copies where an exchange routes a message to several queues)
  const target = last("target_rate"), sent = last("send_rate"), received = last("receive_rate");
  const through = received === null ? null : Math.min(received, sent === null ? Infinity : sent);
  const targets = column("target_rate");
  // the rates of a row were measured over the second before it, at the previous row's target
  const asked = targets.length > 1 ? targets[targets.length - 2] : target;
  const draining = run.label === "draining" || run.label === "paused";
  const achieved = target && asked && through !== null ? through / asked : null;
  const cls = ratioClass(achieved);
  const blocked = last("blocked");
  const state = run.outcome === "running" || run.label.includes(run.outcome) ? run.label
    : `${run.label} (${run.outcome})`;
  return [
    // publishers held by a resource alarm: the broker's doing, not a slow load generator
    blocked ? ["state", `${state}: blocked by the broker`, "bad"] : ["state", state],
    ["elapsed / planned", `${fmt(last("elapsed_s"))} / ${fmt(run.planned_s)} s`],
    ["target", draining ? "senders stopped" : `${fmt(target)} ${unit()}`],
    ["published", `${fmt(last("send_rate"))} ${unit()}`],
    ["consumed", `${fmt(received)} ${unit()}`],
    [`${view.terms.senders} / ${view.terms.receivers} / ${view.terms.queues}`,
      `${fmt(last("sending"))} / ${fmt(last("consuming"))} / ${fmt(last("queues_in_use"))}`],
    ["achieved end to end", draining ? "–" : achieved === null ? "–" : `${fmt(achieved * 100, 1)} %`, cls],
    ["in flight (lag)", `${fmt(last("backlog"))} msgs`],
    ["queue depth", `${fmt(last("queue_depth"))} msgs`],
    ["p50 / p99", `${fmt(last("latency_p50_ms"), 1)} / ${fmt(last("latency_p99_ms"), 1)} ms`],
    ...(column("confirm_p99_ms").some(v => v !== null && v !== undefined)
      ? [["confirm p50 / p99", `${fmt(last("confirm_p50_ms"), 1)} / ${fmt(last("confirm_p99_ms"), 1)} ms`]]
      : []),
    ["members", fmt(last("members_running"))],
    ["errors / reconnects", `${fmt(last("errors"))} / ${fmt(last("reconnects"))}`],
    ["blocked by the broker", `${fmt(blocked)} connections, ${fmt(last("blocked_s"))} s so far`,
      blocked ? "bad" : ""],
    ["consumers cancelled by the broker", fmt(last("cancels"))],
  ];
}

function cell(value) { const td = document.createElement("td"); td.textContent = value; return td; }

function header(name) { const th = document.createElement("th"); th.textContent = name; return th; }

function tables(doc) {
  const t = view.terms, u = unit();
  document.querySelector("#steps thead tr").replaceChildren(...["step", t.senders, t.receivers, t.queues,
    `target ${u}`, `achieved ${u}`, `sent ${u}`, `received ${u}`, "p50 ms", "p99 ms", "members",
    "member CPU %", `broker CPU us/${t.each}`, `generator CPU us/${t.each}`, "saturated", "errors",
    "seconds"].map(header));
  const body = document.querySelector("#steps tbody");
  body.replaceChildren(...view.steps.map(s => {
    const tr = document.createElement("tr");
    const cpu = Object.entries(s.cpu_percent || {}).map(([m, v]) => `${m.split("@")[0]} ${fmt(v, 1)}`).join(", ");
    [s.label || s.step, fmt(s.senders), fmt(s.receivers), fmt(s.queues),
     s.target_rate || s.label === "drain" ? fmt(s.target_rate) : "max",
     fmt(s.achieved_rate), fmt(s.sent_rate), fmt(s.received_rate), fmt(s.p50_ms, 1), fmt(s.p99_ms, 1),
     s.members, cpu || "–", fmt(s.broker_us_per_msg, 1), fmt(s.generator_us_per_msg, 1),
     s.bottleneck || "–", s.errors, s.seconds].forEach(v => tr.append(cell(v)));
    return tr;
  }));
  const accounting = doc.accounting;
  document.getElementById("accounting-section").hidden = !accounting;
  if (accounting) {
    document.querySelector("#accounting tbody").replaceChildren(...Object.entries(accounting)
      .filter(([, v]) => typeof v !== "object" || v === null).map(([k, v]) => {
        const tr = document.createElement("tr");
        tr.append(cell(k.replaceAll("_", " ")), cell(v === null ? "–" : typeof v === "number" ? fmt(v) : String(v)));
        return tr;
      }));
  }
  // all of them each time: an event from before the first tick gets its time once ticks come
  document.getElementById("events").replaceChildren(...view.events.slice().reverse().map(e => {
    const li = document.createElement("li");
    const at = view.offset === null ? "" : `${fmt(e.t - view.offset)} s  `;
    const detail = e.explain || Object.entries(e).filter(([k]) => !["t", "kind", "explain", "agents"].includes(k))
      .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`).join(" ");
    li.textContent = `${at}${e.kind}: ${detail}`;
    return li;
  }));
  const analysis = doc.run.analysis || [];
  document.getElementById("analysis-section").hidden = !analysis.length;
  const holder = document.getElementById("analysis");
  if (holder.childElementCount !== analysis.length) {
    holder.replaceChildren(...analysis.map(name => {
      const img = document.createElement("img");
      img.src = `/analysis/${encodeURIComponent(name)}?${token ? `token=${encodeURIComponent(token)}` : ""}`;
      img.alt = name;
      return img;
    }));
  }
}

function campaign(doc) {
  const c = doc.campaign;
  document.getElementById("campaign").hidden = !c;
  if (!c) return;
  text("campaign-name", c.name);
  const eta = c.eta_s === null ? "ETA after the first cell" : `ETA ${Math.ceil(c.eta_s / 60)} min`;
  text("campaign-progress", `${c.done} done, ${c.running} running, ${c.left} left · ${fmt(c.elapsed_s / 60)} min so far · ${eta}`);
  document.querySelector("#cells tbody").replaceChildren(...c.cells.map(x => {
    const tr = document.createElement("tr");
    [x.name, x.status, x.verdict || "–", x.run_id || "–", x.seconds && x.status === "done" ? `${fmt(x.seconds)} s` : "–"]
      .forEach(v => tr.append(cell(v)));
    tr.className = x.verdict === "pass" ? "good" : x.verdict ? "bad" : "";
    return tr;
  }));
}

async function poll() {
  let live = true;
  try {
    const run = view.runId ? `&run=${encodeURIComponent(view.runId)}` : "";
    const c = view.cursor;
    const response = await fetch(`/api/board?ticks=${c.ticks}&members=${c.members}&events=${c.events}${run}${tokenParam}`);
    const doc = await response.json();
    if (!response.ok) throw new Error(doc.error || response.statusText);
    campaign(doc);
    if (doc.run) {
      if (doc.run.run_id !== view.runId) { reset(doc.run.run_id); return poll(); }
      if (doc.run.terms) view.terms = doc.run.terms;
      text("rates-caption", `Rate (${unit()}): target, published, consumed`);
      absorb(doc);
      tables(doc);  // first: the events of this answer are listed even if a chart fails
      figures(doc);
      if (view.ticks.elapsed_s && view.ticks.elapsed_s.length) redraw();
      text("title", `surge ${doc.run.scenario}`);
      brokerBadge(doc.run);
      live = doc.run.outcome === "running";
    }
    if (doc.campaign) live = live || doc.campaign.left + doc.campaign.running > 0;
    const status = document.getElementById("status");
    status.textContent = doc.run ? `run ${doc.run.run_id} · updated ${new Date().toLocaleTimeString()}` : "waiting for the first run";
    status.classList.remove("stale");
  } catch (error) {
    const status = document.getElementById("status");
    status.textContent = `not updated: ${error.message}`;
    status.classList.add("stale");
  }
  setTimeout(poll, live ? 1000 : 5000);
}

window.addEventListener("resize", () => Object.values(view.charts).forEach(ch =>
  ch.setSize({width: ch.root.parentElement.clientWidth, height: 220})));
poll();
