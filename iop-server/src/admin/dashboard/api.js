// The admin API as the dashboard uses it: JSON requests with the tab's token, and the
// `/v1/events` and `/v1/load/watch` streams read with fetch (EventSource cannot send a header, and the token
// never goes into a URL).

const TOKEN_KEY = "iop-admin-token";

/** An answer of the admin API that is not 2xx: its status, code and message. */
export class ApiError extends Error {
  constructor(status, code, message, body) {
    super(message);
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

/** The tab's token, if one was given. */
export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

/** Keeps `value` as the tab's token (empty: forgets it). */
export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function headers(extra) {
  const h = { Accept: "application/json", ...extra };
  const t = token();
  if (t) h.Authorization = `Bearer ${t}`;
  return h;
}

/** `method path` with an optional JSON body; the parsed JSON answer, or ApiError. */
export async function request(method, path, body) {
  const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, "unreachable", `the admin API did not answer (${e.message})`);
  }
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!res.ok) {
    const err = (json && json.error) || {};
    throw new ApiError(res.status, err.code || `http_${res.status}`, err.message || text || res.statusText, json);
  }
  return json;
}

/**
 * Reads `/v1/events` until `signal` aborts, calling `onEvent(name, data)` for each
 * event and `onState("live" | "reconnecting" | "unauthorized", detail)` as the stream
 * comes and goes. Reconnects with a growing pause (1 s to 10 s); `onEvent("reload")`
 * says events may have been missed (a new stream, or `lagged`), so views reload.
 */
export function streamEvents(onEvent, onState, signal) {
  return stream("/v1/events", onEvent, onState, signal);
}

/**
 * Reads `/v1/load/watch` as {@link streamEvents} reads `/v1/events`: `snapshot` parts,
 * then a `change` per view, update, disconnection or departure; `resync` (or `reload`,
 * a new stream) before a fresh snapshot.
 */
export function streamLoad(onEvent, onState, signal) {
  return stream("/v1/load/watch", onEvent, onState, signal);
}

async function stream(path, onEvent, onState, signal) {
  let pause = 1000;
  while (!signal.aborted) {
    try {
      const res = await fetch(path, { headers: headers({ Accept: "text/event-stream" }), signal });
      if (res.status === 401) {
        onState("unauthorized");
        return;
      }
      if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
      onState("live");
      onEvent("reload", null);
      pause = 1000;
      await readStream(res.body, onEvent);
    } catch (e) {
      if (signal.aborted) return;
      onState("reconnecting", e.message);
    }
    if (signal.aborted) return;
    onState("reconnecting");
    await new Promise((r) => setTimeout(r, pause));
    pause = Math.min(pause * 2, 10000);
  }
}

async function readStream(body, onEvent) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let name = "message";
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let newline;
    while ((newline = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, newline).replace(/\r$/, "");
      buffer = buffer.slice(newline + 1);
      if (line === "") {
        if (data.length) dispatch(onEvent, name, data.join("\n"));
        name = "message";
        data = [];
      } else if (line.startsWith(":")) {
        // A keep-alive comment.
      } else if (line.startsWith("event:")) {
        name = line.slice(6).trim();
      } else if (line.startsWith("data:")) {
        data.push(line.slice(5).replace(/^ /, ""));
      }
    }
  }
}

function dispatch(onEvent, name, text) {
  let data;
  try {
    data = JSON.parse(text);
  } catch {
    return;
  }
  // Too slow a reader: the CP ended the stream; what follows the reconnect is reloaded.
  if (name === "lagged") return;
  onEvent(name, data);
}
