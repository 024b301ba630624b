// Rendering: data from the admin API into the document, always as text (never markup).

import { short, sparkline } from "./charts.js";

// JSON follows the protobuf mapping: fields at their default (false, 0, "") are left
// out, enums are names, 64-bit integers are strings.

/** An element: `attrs` sets `class`, `text`, `data` (dataset) and other attributes. */
export function h(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = String(v);
    else if (k === "data") for (const [dk, dv] of Object.entries(v)) e.dataset[dk] = String(dv);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

/** `NODE_STATE_READY` with prefix `NODE_STATE_` → `READY`; a missing value → `UNSPECIFIED`. */
export function enumName(value, prefix) {
  const v = value || `${prefix}UNSPECIFIED`;
  return v.startsWith(prefix) ? v.slice(prefix.length) : v;
}

const num = (v) => Number(v || 0);

/** A Unix-ms string as a local time of day (with the date when not today). */
export function clock(unixMs) {
  const ms = num(unixMs);
  if (!ms) return "—";
  const d = new Date(ms);
  const today = new Date().toDateString() === d.toDateString();
  return today ? d.toLocaleTimeString() : d.toLocaleString();
}

function badge(text, kind) {
  return h("span", { class: `badge ${kind}`, text });
}

function reachBadge(reachability) {
  return badge(reachability.toLowerCase(), `reach-${reachability.toLowerCase()}`);
}

/** The fleet table's body: one row per Edge of `views` (already filtered). */
export function fleetRows(views, showReplica) {
  return views.map((v) => {
    const s = v.lastStatus;
    const nodes = s ? `${s.connectedNodes || 0} / ${s.nodeCount || 0}${s.truncated ? "+" : ""}` : "—";
    const link = h("a", { href: `#/edge/${encodeURIComponent(v.edgeId)}`, text: v.edgeId });
    const l = v.load;
    return h(
      "tr",
      { data: { edge: v.edgeId, reachability: v.reachability } },
      h("th", { scope: "row" }, link),
      h("td", {}, reachBadge(v.reachability)),
      h("td", { class: "num", data: { field: "nodes" }, text: nodes }),
      h("td", { class: "num", data: { field: "capacity" }, text: l ? short(l.capacity) : "—" }),
      h("td", { class: "num", data: { field: "inFlight" }, text: l ? short(l.inFlight) : "—" }),
      h("td", { class: "num", data: { field: "queued" }, text: l ? short(l.queued) : "—" }),
      h("td", { class: "num", text: v.connected ? v.sessionId : "—" }),
      h("td", { text: v.softwareVersion || "—" }),
      h("td", { class: "ops", text: (v.operations || []).join(", ") || "—" }),
      showReplica ? h("td", { text: v.replica || "—" }) : null,
    );
  });
}

/** The summary list of one Edge's view. */
export function edgeSummary(v) {
  const items = [
    ["State", reachBadge(v.reachability)],
    ["Session", v.connected ? v.sessionId : "—"],
    ["Connected since", v.connected ? clock(v.connectedSinceUnixMs) : "—"],
    ["Software", v.softwareVersion || "—"],
    ["Operations", (v.operations || []).join(", ") || "—"],
    ["Supersessions", v.supersessions || "0"],
  ];
  if (v.replica) items.push(["Replica", v.replica]);
  return items.flatMap(([k, val]) => [h("dt", { text: k }), h("dd", {}, val)]);
}

function gauge(label, value, max, extra) {
  const text = max ? `${value} / ${max}` : String(value);
  return h(
    "div",
    { class: "gauge" },
    h("span", { class: "gauge-label", text: label }),
    max ? h("meter", { min: 0, max, value, low: max * 0.75, high: max, optimum: 0, "aria-label": `${label} ${text}` }) : null,
    h("span", { class: "num", text: extra ? `${text} ${extra}` : text }),
  );
}

/** How long ago `unixMs` was, in words. */
export function ago(unixMs) {
  const s = Math.max(0, Math.round((Date.now() - num(unixMs)) / 1000));
  if (s < 90) return `${s} s ago`;
  if (s < 5400) return `${Math.round(s / 60)} min ago`;
  return `${Math.round(s / 3600)} h ago`;
}

function provider(p, extra) {
  const n = {
    capacity: num(p.capacity),
    inFlight: num(p.inFlight),
    queued: num(p.queued),
    lcCapacity: num(p.longContextCapacity),
    lcInFlight: num(p.longContextInFlight),
    lcQueued: num(p.longContextQueued),
  };
  const status = enumName(p.status, "PROVIDER_STATUS_");
  const health = enumName(p.health, "PROVIDER_HEALTH_");
  const eligible = !!p.admissionEligible;
  return h(
    "li",
    {
      class: "provider",
      data: {
        provider: p.providerId,
        status,
        health,
        eligible,
        capacity: n.capacity,
        inFlight: n.inFlight,
        queued: n.queued,
        longContextInFlight: n.lcInFlight,
      },
    },
    h(
      "div",
      { class: "provider-head" },
      h("strong", { text: p.providerId }),
      h("span", { class: "muted", text: enumName(p.category, "PROVIDER_CATEGORY_").toLowerCase().replace("_", " ") }),
      badge(status.toLowerCase(), status === "AVAILABLE" ? "ok" : "off"),
      badge(health.toLowerCase(), health === "HEALTHY" ? "ok" : "off"),
      badge(eligible ? "admission eligible" : "not eligible", eligible ? "ok" : "off"),
    ),
    gauge("in flight", n.inFlight, n.capacity),
    gauge("queued", n.queued, 0),
    gauge("long context", n.lcInFlight, n.lcCapacity, `· ${n.lcQueued} queued`),
    extra && extra.uses && extra.uses.length
      ? h("div", { class: "gauge" }, h("span", { class: "gauge-label", text: "last hour" }), sparkline(p.providerId, extra.uses))
      : null,
    extra && extra.lastOnline && health === "OFFLINE"
      ? h("p", {
        class: "muted last-online",
        text: `last seen online ${ago(extra.lastOnline.atUnixMs)} with capacity ${extra.lastOnline.capacity}`,
      })
      : null,
  );
}

/**
 * The nodes table's body from an `EdgeStatusResponse`; `extra(nodeId, providerId)`
 * gives what the Control Plane keeps of a provider beside it (its last hour's use,
 * what it last had online).
 */
export function nodeRows(status, extra = () => null) {
  return (status.nodes || []).map((n) => {
    const state = enumName(n.state, "NODE_STATE_");
    const labels = Object.entries(n.labels || {}).map(([k, v]) => h("span", { class: "chip", text: `${k}=${v}` }));
    return h(
      "tr",
      { data: { node: n.nodeId, state, connected: !!n.connected } },
      h("th", { scope: "row", text: n.nodeId }),
      h("td", {}, badge(state.toLowerCase(), `node-${state.toLowerCase()}`)),
      h("td", { text: n.connected ? "yes" : "no" }),
      h("td", { class: "num", text: n.generation || "0" }),
      h("td", {}, labels.length ? labels : "—"),
      h("td", { text: (n.config && n.config.revision) || "—" }),
      h("td", {}, h("ul", { class: "providers" }, (n.providerSnapshots || []).map((p) => provider(p, extra(n.nodeId, p.providerId))))),
    );
  });
}

/** The selectors an operator may pick for this Edge: its nodes, providers and labels. */
export function selectorChoices(status) {
  const out = [["", "the Edge itself"], ["*", "every node"]];
  const labels = new Set();
  for (const n of status ? status.nodes || [] : []) {
    out.push([`node:${n.nodeId}`, `node ${n.nodeId}`]);
    for (const p of n.providerSnapshots || []) out.push([`provider:${n.nodeId}/${p.providerId}`, `provider ${p.providerId} of ${n.nodeId}`]);
    for (const [k, v] of Object.entries(n.labels || {})) labels.add(`label:${k}=${v}`);
  }
  for (const l of [...labels].sort()) out.push([l, "nodes with this label"]);
  return out;
}

const TERMINAL = new Set(["SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT"]);

/** Whether the Edge may still stop `c` (accepted, not ended; a cancellation is not
 * itself cancelled). */
function cancellable(c, last) {
  return Boolean(c.response && c.response.accepted) && !TERMINAL.has(last)
    && c.operation !== "command.cancel";
}

/** One command's timeline: what was sent, the Edge's answer, then each phase. */
export function commandItem(c) {
  const phases = [...c.events.values()].sort((a, b) => a.sequence - b.sequence);
  const last = phases.length ? enumName(phases[phases.length - 1].phase, "COMMAND_PHASE_") : "SENT";
  let answer = "awaiting the Edge's answer";
  if (c.response) {
    answer = c.response.accepted
      ? "accepted"
      : `rejected ${enumName(c.response.rejectReason, "COMMAND_REJECT_REASON_")}: ${c.response.message || ""}`;
  }
  return h(
    "li",
    { class: `timeline phase-${last.toLowerCase()}`, data: { command: c.commandId, phase: last } },
    h(
      "div",
      { class: "timeline-head" },
      h("strong", { text: c.operation }),
      h("code", { text: c.selector || "(the Edge)" }),
      h("span", { class: "muted", text: c.commandId }),
      badge(last.toLowerCase(), `phase-${last.toLowerCase()}`),
      cancellable(c, last)
        ? h("button", {
          type: "button",
          class: "cancel",
          text: "Cancel",
          "aria-label": `Cancel ${c.operation} ${c.commandId}`,
          data: { cancel: c.commandId },
        })
        : null,
    ),
    h("p", { class: "muted", text: answer }),
    h(
      "ol",
      { class: "phases" },
      phases.map((e) => {
        const phase = enumName(e.phase, "COMMAND_PHASE_");
        const detail = Object.entries(e.detail || {}).map(([k, v]) => `${k}=${v}`).join(" ");
        return h(
          "li",
          { data: { phase } },
          h("span", { class: "num", text: clock(e.occurredAtUnixMs) }),
          h("strong", { text: phase }),
          h("span", { text: e.message || "" }),
          detail ? h("span", { class: "muted", text: detail }) : null,
        );
      }),
    ),
  );
}

/** What an event of the stream says, in one line. */
export function eventText(name, d) {
  switch (name) {
    case "edge_connected":
      return `session ${d.sessionId}${d.supersededSessionId ? ` (superseded ${d.supersededSessionId})` : ""}`;
    case "edge_disconnected":
      return `session ${d.sessionId} ended: ${d.reason}`;
    case "edge_unreachable":
      return `session ${d.sessionId} silent for ${d.silentForMs} ms`;
    case "edge_reachable":
      return `session ${d.sessionId} heard again`;
    case "edge_superseded":
      return `session ${d.oldSessionId} → ${d.newSessionId}${d.flapping ? " (flapping)" : ""}`;
    case "node_event":
      return `${d.nodeId || "(edge)"} ${enumName(d.kind, "NODE_EVENT_KIND_").toLowerCase()} · generation ${d.generation || 0}${d.reason ? ` · ${d.reason}` : ""}`;
    case "command_event":
      return `${d.commandId} ${enumName(d.phase, "COMMAND_PHASE_")}${d.message ? ` · ${d.message}` : ""}`;
    case "command_ended":
      return `${d.commandId} ${d.ending} · ${d.message}`;
    case "edge_forgotten":
      return `forgotten: ${d.reason}`;
    default:
      return JSON.stringify(d);
  }
}

/** A row of the events table. */
export function eventRow(ev) {
  return h(
    "tr",
    { data: { kind: ev.name } },
    h("td", { class: "num", text: ev.at.toLocaleTimeString() }),
    h("td", {}, h("code", { text: ev.name })),
    h("td", { text: ev.edgeId || "—" }),
    h("td", { text: ev.text }),
  );
}
