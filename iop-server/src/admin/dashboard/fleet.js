// The fleet page: the fleet's load at a glance (totals, by category and model, with
// bars of in flight and queued against capacity), line charts of its last hour, and
// the Edges a page at a time (the API pages, filters and counts: the page stays
// light at 20 000 Edges).

import { request, streamLoad } from "./api.js";
import { lineChart, loadBar, short, svg } from "./charts.js";
import { fleetRows, h } from "./views.js";

const $ = (id) => document.getElementById(id);

/** Edges a page of the list holds. */
export const PAGE = 100;
/** Models shown at most in the load's breakdown (the largest first). */
const MODELS_SHOWN = 12;

/** The query of the list's current page. */
function pageQuery(state) {
  const q = new URLSearchParams({ limit: String(PAGE) });
  const text = $("fleet-text").value.trim();
  const reach = $("fleet-state").value;
  if (text) q.set("q", text);
  if (reach) q.set("state", reach);
  if (state.pager.after) q.set("after", state.pager.after);
  return q.toString();
}

/** Reads the current page of the list; its views join `state.edges`. */
export async function loadPage(state) {
  const started = performance.now();
  const body = await request("GET", `/v1/edges?${pageQuery(state)}`);
  for (const v of body.edges) state.edges.set(v.edgeId, v);
  state.page = { ids: body.edges.map((v) => v.edgeId), total: body.total, next: body.next || "" };
  renderFleet(state);
  // How long the list took, from the request to the rows drawn, and when it was
  // drawn first and last (ms since the page's navigation; read by the benchmark).
  const now = performance.now();
  const marks = document.body.dataset;
  marks.fleetMs = String(Math.round(now - started));
  marks.listDrawnAt = String(Math.round(now));
  if (!marks.firstListAt) marks.firstListAt = marks.listDrawnAt;
}

/** Draws the current page. */
export function renderFleet(state) {
  const views = state.page.ids.map((id) => state.edges.get(id)).filter(Boolean);
  const replica = views.some((v) => v.replica);
  for (const th of document.querySelectorAll("[data-replica]")) th.hidden = !replica;
  $("fleet").tBodies[0].replaceChildren(...fleetRows(views, replica));
  const first = state.pager.back.length * PAGE;
  $("fleet-summary").textContent = state.page.total
    ? `${state.page.total} edges match · ${first + 1}–${first + views.length} shown`
    : "no edge matches";
  $("fleet-prev").disabled = state.pager.back.length === 0;
  $("fleet-next").disabled = !state.page.next;
}

/** The list from its first page again (the filters changed). */
export function firstPage(state) {
  state.pager = { after: "", back: [] };
  return loadPage(state);
}

export function nextPage(state) {
  if (!state.page.next) return Promise.resolve();
  state.pager.back.push(state.pager.after);
  state.pager.after = state.page.next;
  return loadPage(state);
}

export function previousPage(state) {
  if (!state.pager.back.length) return Promise.resolve();
  state.pager.after = state.pager.back.pop();
  return loadPage(state);
}

/** Reads the fleet's load and its last hour. */
export async function loadLoad(state) {
  const [load, history] = await Promise.all([
    request("GET", "/v1/fleet/load"),
    request("GET", "/v1/fleet/history"),
  ]);
  state.load = load;
  state.history = history;
  renderLoad(state);
  const marks = document.body.dataset;
  marks.loadAt = String(Math.round(performance.now()));
  if (!marks.firstLoadAt) marks.firstLoadAt = marks.loadAt;
}

/** The load panel redraws at most this often while the load changes. */
const LOAD_REDRAW_MS = 1000;

/**
 * Follows the fleet's load (`/v1/load/watch`) until `signal` aborts: the load panel is
 * read again when the load changed (at most every second), never while it is idle;
 * `onEdge(edgeId)` for each Edge whose providers changed. Counts the changes seen on
 * `<body data-watch-changes>`.
 */
export function followLoad(state, signal, onEdge, failed) {
  let due = null;
  let last = 0;
  const redraw = () => {
    if (due || signal.aborted) return;
    const wait = Math.max(0, last + LOAD_REDRAW_MS - performance.now());
    due = setTimeout(() => {
      due = null;
      last = performance.now();
      if (!signal.aborted) loadLoad(state).catch(failed);
    }, wait);
  };
  signal.addEventListener("abort", () => clearTimeout(due));
  const marks = document.body.dataset;
  const onEvent = (name, data) => {
    if (name === "change") {
      marks.watchChanges = String(Number(marks.watchChanges || 0) + 1);
      onEdge(data.edgeId);
      redraw();
    } else if (name === "resync" || (name === "snapshot" && data.last)) {
      redraw();
    }
  };
  streamLoad(onEvent, () => {}, signal);
}

/** A colour's sample for the legend (the bars' own class). */
function swatch(cls) {
  return svg("svg", { class: "swatch loadbar", width: 12, height: 12, "aria-hidden": "true" },
    svg("rect", { class: cls, x: 0, y: 0, width: 12, height: 12 }));
}

function figure(label, value, field) {
  return [h("dt", { text: label }), h("dd", { class: "num", data: { field }, text: value })];
}

function groupRows(groups) {
  return groups.map(([name, t]) =>
    h(
      "tr",
      { data: { group: name } },
      h("th", { scope: "row", text: name }),
      h("td", {}, loadBar(name, t, { width: 150, height: 12 })),
      h("td", { class: "num", text: `${short(t.inFlight)} / ${short(t.capacity)}` }),
      h("td", { class: "num", text: short(t.queued) }),
      h("td", { class: "num", text: short(t.offlineCapacity) }),
    ));
}

/** Draws the load: figures, bars and the last hour's charts. */
export function renderLoad(state) {
  const l = state.load;
  if (!l) return;
  const t = l.total;
  const n = l.nodes;
  const replicas = l.replicas.asked > 1 ? ` · ${l.replicas.answered} of ${l.replicas.asked} replicas answered` : "";
  $("load-summary").textContent =
    `${l.edges.live} edges live, ${l.edges.offline} offline · nodes ${n.ready} ready, ` +
    `${n.pending} pending, ${n.configured} configured, ${n.disconnected} disconnected` +
    `${replicas} · as of ${new Date(l.asOfUnixMs).toLocaleTimeString()}`;
  $("load-totals").replaceChildren(
    h(
      "div",
      { class: "total-bar" },
      loadBar("The whole fleet", t, { width: 360, height: 18 }),
      h(
        "p",
        { class: "legend muted" },
        swatch("bar-in-flight"), " in flight ", swatch("bar-queued"), " queued ",
        swatch("bar-capacity"), " capacity",
      ),
    ),
    h(
      "dl",
      { class: "figures" },
      figure("Capacity", short(t.capacity), "capacity"),
      figure("In flight", short(t.inFlight), "inFlight"),
      figure("Queued", short(t.queued), "queued"),
      figure("Available", short(t.available), "available"),
      figure("Long context", `${short(t.longContextInFlight)} / ${short(t.longContextCapacity)} · ${short(t.longContextQueued)} queued`, "longContext"),
      figure("Offline capacity", short(t.offlineCapacity), "offlineCapacity"),
    ),
  );
  const categories = Object.entries(l.byCategory).filter(([, c]) => c.providers > 0);
  $("load-categories").tBodies[0].replaceChildren(...groupRows(categories));
  const models = Object.entries(l.byModel)
    .sort((a, b) => b[1].capacity + b[1].offlineCapacity - (a[1].capacity + a[1].offlineCapacity))
    .slice(0, MODELS_SHOWN);
  $("load-models").tBodies[0].replaceChildren(...groupRows(models));
  renderCharts(state);
}

function renderCharts(state) {
  const samples = (state.history && state.history.samples) || [];
  $("load-charts").dataset.samples = String(samples.length);
  const series = (name, field, cls) => [{ name, cls, points: samples.map((s) => [s.atUnixMs, s[field]]) }];
  $("load-charts").replaceChildren(
    ...[
      ["Capacity", "capacity", "capacity"],
      ["In flight", "inFlight", "in-flight"],
      ["Queued", "queued", "queued"],
      ["Offline capacity", "offlineCapacity", "offline"],
    ].map(([title, field, cls]) =>
      h("figure", { class: "chart-box" }, h("figcaption", { text: title }), lineChart(title, series(title.toLowerCase(), field, cls)))),
  );
}
