// Charts drawn as SVG by this module: line charts of the fleet's last hour, bars of
// load against capacity, and sparklines of a provider's use. No library, nothing
// fetched; every number is written as an attribute or as text (the page's
// Content-Security-Policy allows no inline style, and data never becomes markup).
// Colours come from the stylesheet (classes), so light and dark modes both read.
// Each chart is focusable and says in words what it shows (`aria-label`).

const SVG = "http://www.w3.org/2000/svg";

/** An SVG element with attributes (text content via `text`). */
export function svg(tag, attrs = {}, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null) continue;
    if (k === "text") e.textContent = String(v);
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) if (c) e.append(c);
  return e;
}

/** A number as people read it: 1 234, 12.5k, 3.1M. */
export function short(n) {
  const v = Number(n || 0);
  if (v >= 1e6) return `${(v / 1e6).toFixed(1)}M`;
  if (v >= 1e4) return `${(v / 1e3).toFixed(1)}k`;
  return v.toLocaleString("en-US");
}

/** A time of day, hours and minutes. */
const hhmm = (ms) => new Date(ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });

/**
 * An `<svg>` figure of class `cls`, read by screen readers as `text` (its label and
 * title) and reachable with the keyboard; `data` are its `data-*` attributes.
 */
function figure(cls, text, { width, height, sized = true }, data, ...children) {
  const size = sized ? { width, height } : {};
  return svg(
    "svg",
    { class: cls, viewBox: `0 0 ${width} ${height}`, ...size, role: "img", tabindex: 0, "aria-label": text, ...data },
    svg("title", { text }),
    ...children,
  );
}

/**
 * A line chart of `series` (each `{ name, cls, points: [[atUnixMs, value], ...] }`),
 * titled `title`. The points it drew are counted in `data-points`.
 */
export function lineChart(title, series, { width = 320, height = 120 } = {}) {
  const pad = { l: 44, r: 8, t: 8, b: 20 };
  const all = series.flatMap((s) => s.points);
  const times = all.map((p) => p[0]);
  const t0 = Math.min(...times, Date.now());
  const t1 = Math.max(...times, t0 + 1);
  const top = Math.max(1, ...all.map((p) => p[1]));
  const x = (t) => pad.l + ((t - t0) / (t1 - t0)) * (width - pad.l - pad.r);
  const y = (v) => height - pad.b - (v / top) * (height - pad.t - pad.b);
  const latest = series.map((s) => {
    const last = s.points[s.points.length - 1];
    return `${s.name} ${last ? short(last[1]) : "none"}`;
  });
  const label = `${title} over the last hour, ${all.length ? `now ${latest.join(", ")}; at most ${short(top)}` : "no samples yet"}`;
  const lines = series.map((s) =>
    svg("polyline", {
      class: `line ${s.cls || ""}`,
      fill: "none",
      "data-series": s.name,
      "data-points": s.points.length,
      points: s.points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" "),
    }));
  const axis = [
    svg("line", { class: "axis", x1: pad.l, x2: width - pad.r, y1: height - pad.b, y2: height - pad.b }),
    svg("line", { class: "axis", x1: pad.l, x2: pad.l, y1: pad.t, y2: height - pad.b }),
    svg("text", { class: "tick", x: pad.l - 4, y: pad.t + 8, "text-anchor": "end", text: short(top) }),
    svg("text", { class: "tick", x: pad.l - 4, y: height - pad.b, "text-anchor": "end", text: "0" }),
    all.length ? svg("text", { class: "tick", x: pad.l, y: height - 4, text: hhmm(t0) }) : null,
    all.length ? svg("text", { class: "tick", x: width - pad.r, y: height - 4, "text-anchor": "end", text: hhmm(t1) }) : null,
  ];
  return figure("chart", label, { width, height, sized: false },
    { "data-chart": title, "data-points": all.length },
    axis,
    lines,
  );
}

/**
 * A horizontal bar of `capacity`: `inFlight` filled, `queued` drawn after it (it may
 * pass the end: work waiting beyond what can run). Named `label` for screen readers.
 */
export function loadBar(label, { capacity, inFlight, queued }, { width = 220, height = 14 } = {}) {
  const cap = Number(capacity || 0);
  const held = Number(inFlight || 0);
  const waiting = Number(queued || 0);
  const scale = Math.max(cap, held + waiting, 1);
  const w = (v) => ((v / scale) * width).toFixed(1);
  const text = `${label}: ${short(held)} in flight and ${short(waiting)} queued of ${short(cap)} capacity`;
  return figure("loadbar", text, { width, height },
    { "data-capacity": cap, "data-in-flight": held, "data-queued": waiting },
    svg("rect", { class: "bar-capacity", x: 0, y: 0, width: w(cap), height }),
    svg("rect", { class: "bar-in-flight", x: 0, y: 0, width: w(held), height }),
    svg("rect", { class: "bar-queued", x: w(held), y: height / 4, width: w(waiting), height: height / 2 }),
  );
}

/**
 * A sparkline of a provider's use (`uses`: 0..1, `null` while offline), drawn as
 * segments with gaps where it was offline.
 */
export function sparkline(label, uses, { width = 120, height = 22 } = {}) {
  const n = Math.max(uses.length - 1, 1);
  const x = (i) => ((i / n) * (width - 2) + 1).toFixed(1);
  const y = (u) => (height - 1 - u * (height - 2)).toFixed(1);
  const runs = [];
  let run = [];
  uses.forEach((u, i) => {
    if (u === null || u === undefined) {
      if (run.length) runs.push(run);
      run = [];
    } else run.push(`${x(i)},${y(u)}`);
  });
  if (run.length) runs.push(run);
  const last = uses.length ? uses[uses.length - 1] : null;
  const now = last === null || last === undefined ? "offline now" : `${Math.round(last * 100)} % now`;
  const text = `${label} use over the last hour: ${now}`;
  return figure("sparkline", text, { width, height }, { "data-points": uses.length },
    svg("line", { class: "axis", x1: 0, x2: width, y1: height - 1, y2: height - 1 }),
    runs.map((r) => (r.length === 1
      ? svg("circle", { class: "line", cx: r[0].split(",")[0], cy: r[0].split(",")[1], r: 1.5 })
      : svg("polyline", { class: "line", fill: "none", points: r.join(" ") }))),
  );
}
