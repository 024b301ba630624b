// The dashboard: the fleet's load and its Edges, one Edge's nodes and providers,
// commands and events, kept live from `/v1/events` plus a status round trip whenever
// an event says an Edge's nodes changed, and the load re-read every few seconds.

import { ApiError, request, setToken, streamEvents, token } from "./api.js";
import {
  firstPage, followLoad, loadLoad, loadPage, nextPage, previousPage, renderFleet, renderLoad,
} from "./fleet.js";
import {
  commandItem, edgeSummary, eventRow, eventText, h, nodeRows, selectorChoices,
} from "./views.js";

const $ = (id) => document.getElementById(id);

/** How often an open Edge view re-reads its last hour (and the fleet page the fleet's,
    while its load is idle: changes come from the load watch). */
const HISTORY_EVERY_MS = 10000;
/** Events kept for the events view. */
const EVENTS_KEPT = 500;
/** Commands whose timelines are kept. */
const COMMANDS_KEPT = 200;
/** How often an open Edge view re-reads its status (provider numbers change silently). */
const STATUS_EVERY_MS = 5000;

const state = {
  edges: new Map(), // edgeId → view (of the page shown, and of Edges opened)
  page: { ids: [], total: 0, next: "" }, // the page of the Edge list shown
  pager: { after: "", back: [] }, // where it starts, and where the pages before did
  load: null, // the fleet's load (`/v1/fleet/load`)
  history: null, // its last hour (`/v1/fleet/history`)
  edgeHistory: new Map(), // edgeId → its last hour (`/v1/edges/{id}/history`)
  status: new Map(), // edgeId → last EdgeStatusResponse
  commands: new Map(), // commandId → { commandId, edgeId, operation, selector, response, events }
  events: [], // newest first: { name, edgeId, text, at }
  route: { view: "fleet" },
  stream: null,
  watch: null, // the load watch's AbortController while the fleet page is shown
};

// ---- helpers -------------------------------------------------------------------

function show(id) {
  for (const v of ["login-view", "fleet-view", "edge-view", "events-view"]) $(v).hidden = v !== id;
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (`${a.dataset.nav}-view` === id) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

function notice(text) {
  $("notice").textContent = text || "";
  $("notice").hidden = !text;
}

function describe(e) {
  return e instanceof ApiError ? `${e.code}: ${e.message}` : String(e.message || e);
}

/** Runs `f` at most once per `ms` per `key`, the last call winning. */
const timers = new Map();
function debounce(key, ms, f) {
  clearTimeout(timers.get(key));
  timers.set(key, setTimeout(() => { timers.delete(key); f(); }, ms));
}

/** API failures: a 401 asks for a token; anything else is shown. */
function failed(e) {
  if (e instanceof ApiError && e.status === 401) {
    askToken(token() ? "That token was refused; give another." : "");
    return;
  }
  notice(describe(e));
}

// ---- token ---------------------------------------------------------------------

function askToken(message) {
  stopStream();
  show("login-view");
  notice(message);
  $("token").focus();
}

$("login-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  setToken($("token").value.trim());
  $("token").value = "";
  notice("");
  start();
});

$("forget").addEventListener("click", () => {
  setToken("");
  askToken("The token is forgotten.");
});

// ---- data ----------------------------------------------------------------------

async function loadEdges() {
  await loadPage(state);
  if (state.route.view === "edge") renderEdgeSummary();
}

async function loadEdgeHistory(edgeId) {
  try {
    state.edgeHistory.set(edgeId, await request("GET", `/v1/edges/${encodeURIComponent(edgeId)}/history`));
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return failed(e);
    state.edgeHistory.delete(edgeId);
  }
  if (isOpen(edgeId)) renderNodes();
}

async function loadEdge(edgeId) {
  try {
    state.edges.set(edgeId, await request("GET", `/v1/edges/${encodeURIComponent(edgeId)}`));
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) state.edges.delete(edgeId);
    else throw e;
  }
  if (state.page.ids.includes(edgeId)) renderFleet(state);
  if (state.route.view === "edge" && state.route.edgeId === edgeId) {
    renderEdgeSummary();
    renderNodes();
  }
}

/** Status round trips in flight for Edges not on screen (the fleet's node counts). */
let background = 0;
const BACKGROUND_AT_ONCE = 4;

/** A status round trip to `edgeId`; the view re-renders with its answer. */
async function loadStatus(edgeId) {
  if (!isOpen(edgeId)) {
    if (background >= BACKGROUND_AT_ONCE) {
      debounce(`status:${edgeId}`, 1000, () => loadStatus(edgeId));
      return;
    }
    background += 1;
    try {
      await loadStatusNow(edgeId);
    } finally {
      background -= 1;
    }
    return;
  }
  await loadStatusNow(edgeId);
}

async function loadStatusNow(edgeId) {
  const note = $("status-note");
  try {
    const status = await request("GET", `/v1/edges/${encodeURIComponent(edgeId)}/status`);
    state.status.set(edgeId, status);
    if (isOpen(edgeId)) {
      note.textContent = `status observed ${new Date(Number(status.observedAtUnixMs || 0)).toLocaleTimeString()}${status.truncated ? " (truncated: more nodes than one answer holds)" : ""}`;
    }
    await loadEdge(edgeId); // the view's node counts follow the answer
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return failed(e);
    if (isOpen(edgeId)) note.textContent = `no live status: ${describe(e)}`;
    if (e instanceof ApiError && e.code === "not_connected") {
      // A disconnected Edge has no live status: its nodes are shown as last seen.
      await loadEdge(edgeId).catch(() => {});
    }
  }
  if (isOpen(edgeId)) renderNodes();
}

const isOpen = (edgeId) => state.route.view === "edge" && state.route.edgeId === edgeId;

// ---- events --------------------------------------------------------------------

function onEvent(name, d) {
  if (name === "reload") {
    loadEdges().catch(failed);
    loadLoad(state).catch(failed);
    if (state.route.view === "edge") loadStatus(state.route.edgeId);
    return;
  }
  const edgeId = d.edgeId || "";
  state.events.unshift({ name, edgeId, text: eventText(name, d), at: new Date() });
  state.events.length = Math.min(state.events.length, EVENTS_KEPT);
  if (state.route.view === "events") renderEvents();

  if (name === "command_event") {
    const c = state.commands.get(d.commandId) || remember({ commandId: d.commandId, edgeId, operation: "", selector: "" });
    c.events.set(d.sequence || 0, d);
    renderCommands();
  }
  // Whatever changes an Edge's nodes or session: re-read its view, and its status
  // while it is open or shown in the fleet (debounced per Edge).
  if (name.startsWith("edge_")) {
    if (state.page.ids.includes(edgeId) || isOpen(edgeId)) {
      debounce(`edge:${edgeId}`, 200, () => loadEdge(edgeId).catch(failed));
    } else if (state.route.view === "fleet") {
      // An Edge not on the page: the page (its count, its order) may have changed.
      debounce("page", 500, () => loadPage(state).catch(failed));
    }
  }
  if (name === "node_event" || name === "edge_connected" || name === "edge_reachable") {
    debounce(`status:${edgeId}`, 300, () => loadStatus(edgeId));
  }
}

function onStreamState(s) {
  const live = $("live");
  if (s === "unauthorized") return askToken(token() ? "That token was refused; give another." : "");
  live.textContent = s === "live" ? "live" : "reconnecting…";
  live.className = `live ${s}`;
}

function startStream() {
  stopStream();
  state.stream = new AbortController();
  streamEvents(onEvent, onStreamState, state.stream.signal);
}

function stopStream() {
  if (state.stream) state.stream.abort();
  state.stream = null;
}

// ---- views ---------------------------------------------------------------------

function renderEdgeSummary() {
  const v = state.edges.get(state.route.edgeId);
  $("edge-title").textContent = `Edge ${state.route.edgeId}`;
  $("edge-summary").replaceChildren(...(v ? edgeSummary(v) : [h("dt", { text: "State" }), h("dd", { text: "unknown to this Control Plane" })]));
  const select = $("operation");
  // A cancellation names its target: it is sent from a running command's Cancel button.
  const ops = (v ? v.operations || [] : []).filter((op) => op !== "command.cancel");
  const current = select.value;
  if ([...select.options].map((o) => o.value).join() !== ops.join()) {
    select.replaceChildren(...ops.map((op) => h("option", { value: op, text: op })));
    if (ops.includes(current)) select.value = current;
  }
}

/** What the Control Plane keeps of each provider of the open Edge: its last hour's
 * use and what it last had online. */
function providerExtras(edgeId) {
  const view = state.edges.get(edgeId);
  const history = state.edgeHistory.get(edgeId);
  return (nodeId, providerId) => {
    const node = view && view.loadView && view.loadView.nodes.find((n) => n.nodeId === nodeId);
    const p = node && node.providers.find((x) => x.providerId === providerId);
    const h = history && history.providers.find((x) => x.nodeId === nodeId && x.providerId === providerId);
    return { lastOnline: p && p.lastOnline, uses: h ? h.uses : [] };
  };
}

function renderNodes() {
  const status = state.status.get(state.route.edgeId);
  $("nodes").tBodies[0].replaceChildren(...(status ? nodeRows(status, providerExtras(state.route.edgeId)) : []));
  $("selectors").replaceChildren(
    ...selectorChoices(status).map(([value, label]) => h("option", { value, label })),
  );
}

function renderCommands() {
  if (state.route.view !== "edge") return;
  const mine = [...state.commands.values()].filter((c) => c.edgeId === state.route.edgeId).reverse();
  $("commands").replaceChildren(...mine.map(commandItem));
}

function renderEvents() {
  const text = $("events-text").value.trim().toLowerCase();
  const kind = $("events-kind").value;
  const rows = state.events.filter(
    (e) => (!kind || e.name === kind) && (!text || `${e.edgeId} ${e.text}`.toLowerCase().includes(text)),
  );
  $("events").tBodies[0].replaceChildren(...rows.map(eventRow));
}

for (const name of [
  "edge_connected", "edge_disconnected", "edge_unreachable", "edge_reachable", "edge_superseded",
  "node_event", "command_event", "command_ended", "edge_forgotten",
]) {
  $("events-kind").append(h("option", { value: name, text: name }));
}
$("fleet-text").addEventListener("input", () => debounce("filter", 250, () => firstPage(state).catch(failed)));
$("fleet-state").addEventListener("change", () => firstPage(state).catch(failed));
$("fleet-next").addEventListener("click", () => nextPage(state).catch(failed));
$("fleet-prev").addEventListener("click", () => previousPage(state).catch(failed));
$("events-text").addEventListener("input", renderEvents);
$("events-kind").addEventListener("change", renderEvents);
for (const f of ["fleet-filter", "events-filter"]) $(f).addEventListener("submit", (ev) => ev.preventDefault());

// ---- commands ------------------------------------------------------------------

function remember(c) {
  const entry = { response: null, events: new Map(), ...c };
  state.commands.set(c.commandId, entry);
  while (state.commands.size > COMMANDS_KEPT) state.commands.delete(state.commands.keys().next().value);
  return entry;
}

$("command-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const edgeId = state.route.edgeId;
  const operation = $("operation").value;
  const selector = $("selector").value.trim();
  const timeoutMs = Number($("timeout").value || 0);
  const error = $("command-error");
  error.hidden = true;
  $("send").disabled = true;
  try {
    const body = { operation, targetSelector: selector };
    if (timeoutMs > 0) body.timeoutMs = timeoutMs;
    const answer = await request("POST", `/v1/edges/${encodeURIComponent(edgeId)}/commands`, body);
    // Events may have come in on the stream before this answer: keep them.
    const known = state.commands.get(answer.commandId);
    const c = known || remember({ commandId: answer.commandId, edgeId });
    Object.assign(c, { edgeId, operation, selector, response: answer.response });
    renderCommands();
    // Phases that came before this answer; a command sent through another replica
    // has its record there (404 here), and its phases arrive on the stream.
    try {
      const record = await request("GET", `/v1/commands/${encodeURIComponent(answer.commandId)}`);
      for (const e of record.events || []) c.events.set(e.sequence || 0, e);
      renderCommands();
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) throw e;
    }
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) failed(e);
    else {
      error.textContent = `The command was not sent: ${describe(e)}`;
      error.hidden = false;
    }
  } finally {
    $("send").disabled = false;
  }
});

// A running command's Cancel button: `command.cancel` through the API, followed like
// any other command.
$("commands").addEventListener("click", async (ev) => {
  const button = ev.target.closest("button[data-cancel]");
  if (!button) return;
  const target = button.dataset.cancel;
  const error = $("command-error");
  error.hidden = true;
  button.disabled = true;
  try {
    const answer = await request("POST", `/v1/commands/${encodeURIComponent(target)}/cancel`);
    const c = state.commands.get(answer.commandId)
      || remember({ commandId: answer.commandId, edgeId: answer.edgeId });
    Object.assign(c, {
      edgeId: answer.edgeId, operation: "command.cancel", selector: "", response: answer.response,
    });
    renderCommands();
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) failed(e);
    else {
      error.textContent = `The command was not cancelled: ${describe(e)}`;
      error.hidden = false;
      button.disabled = false;
    }
  }
});

// ---- routing -------------------------------------------------------------------

let statusTimer = null;
let historyTimer = null;
let fleetTimer = null;

function route() {
  const hash = location.hash.replace(/^#/, "") || "/";
  clearInterval(statusTimer);
  clearInterval(historyTimer);
  clearInterval(fleetTimer);
  if (state.watch) state.watch.abort();
  state.watch = null;
  notice("");
  if (hash.startsWith("/edge/")) {
    const edgeId = decodeURIComponent(hash.slice(6));
    state.route = { view: "edge", edgeId };
    show("edge-view");
    $("status-note").textContent = "asking the Edge for its status…";
    $("command-error").hidden = true;
    renderEdgeSummary();
    renderNodes();
    renderCommands();
    loadEdge(edgeId).then(() => loadStatus(edgeId)).catch(failed);
    loadEdgeHistory(edgeId);
    statusTimer = setInterval(() => loadStatus(edgeId), STATUS_EVERY_MS);
    historyTimer = setInterval(() => loadEdgeHistory(edgeId), HISTORY_EVERY_MS);
    $("edge-title").focus();
  } else if (hash === "/events") {
    state.route = { view: "events" };
    show("events-view");
    renderEvents();
    $("events-title").focus();
  } else {
    state.route = { view: "fleet" };
    show("fleet-view");
    renderFleet(state);
    renderLoad(state);
    loadPage(state).catch(failed);
    // The load panel follows the watch (read again as the load changes); the
    // charts' samples also come at the history's own pace while the load is idle.
    loadLoad(state).catch(failed);
    fleetTimer = setInterval(() => loadLoad(state).catch(failed), HISTORY_EVERY_MS);
    state.watch = new AbortController();
    followLoad(state, state.watch.signal, (edgeId) => {
      if (state.page.ids.includes(edgeId)) debounce(`edge:${edgeId}`, 200, () => loadEdge(edgeId).catch(failed));
    }, failed);
  }
}

async function start() {
  try {
    await loadEdges();
  } catch (e) {
    return failed(e);
  }
  $("forget").hidden = !token();
  route();
  startStream();
}

// A fault of the page itself is shown (and counted on <body>), not left in the console.
function fault(text) {
  document.body.dataset.faults = String(Number(document.body.dataset.faults || 0) + 1);
  notice(`dashboard error: ${text}`);
}
window.addEventListener("error", (e) => fault(e.message));
window.addEventListener("unhandledrejection", (e) => fault(describe(e.reason || e)));
window.addEventListener("hashchange", route);
start();

