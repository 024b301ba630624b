//! What each `iopctl` subcommand asks the admin API, and what it prints.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::http::{Admin, Reply};
use super::{CtlError, Exit, render};

/// How answers are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Tables and lines for people.
    Table,
    /// The admin API's JSON, for scripts (events: one object per line).
    Json,
}

/// How often a waiting `send` or `cancel` reads the command's record.
const POLL: Duration = Duration::from_millis(200);

/// The Edge's default command timeout, for a command sent without one.
const EDGE_DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How long past its timeout a waiting caller keeps reading a command's record (its
/// Edge may be reconnecting).
const WAIT_MARGIN: Duration = Duration::from_secs(60);

/// Writes `text` to stdout; false once stdout is gone (a closed pipe): stop quietly.
pub(super) fn emit(text: &str) -> bool {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .is_ok()
}

pub(super) fn emit_json(value: &Value) -> bool {
    emit(&format!(
        "{}\n",
        serde_json::to_string_pretty(value).unwrap_or_default()
    ))
}

/// `s` for a path segment: the id grammar's bytes as they are, every other byte
/// percent-encoded.
pub(super) fn segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The answer of `GET path`, or the error it stands for.
pub(super) async fn get(admin: &Admin, path: &str) -> Result<Value, CtlError> {
    ok(admin.call("GET", path, None).await?)
}

pub(super) fn ok(reply: Reply) -> Result<Value, CtlError> {
    if (200..300).contains(&reply.status) {
        Ok(reply.json)
    } else {
        Err(CtlError::from_reply(&reply))
    }
}

/// Which Edges `iopctl edges` lists: the admin API's filters (`state`, `q`) and one
/// page of them (`limit`, `after`); none of them, every Edge.
#[derive(Debug, Clone, Default)]
pub struct EdgeFilter {
    /// Reachabilities to keep (`connected`, `unreachable`, `disconnected`).
    pub states: Vec<String>,
    /// A text the Edge's id, version, metadata or replica holds.
    pub query: Option<String>,
    /// Edges per page.
    pub limit: Option<usize>,
    /// Edges after this id (the page before's last).
    pub after: Option<String>,
}

impl EdgeFilter {
    /// `GET /v1/edges` with this filter's query.
    fn path(&self) -> String {
        let mut query = Vec::new();
        if !self.states.is_empty() {
            let states: Vec<String> = self.states.iter().map(|s| segment(s)).collect();
            query.push(format!("state={}", states.join(",")));
        }
        if let Some(q) = &self.query {
            query.push(format!("q={}", segment(q)));
        }
        if let Some(limit) = self.limit {
            query.push(format!("limit={limit}"));
        }
        if let Some(after) = &self.after {
            query.push(format!("after={}", segment(after)));
        }
        if query.is_empty() {
            "/v1/edges".into()
        } else {
            format!("/v1/edges?{}", query.join("&"))
        }
    }
}

/// `iopctl edges [-w] [FILTER]`: the Edges (or a page of those the filter keeps);
/// with `watch`, again on every change of one.
pub async fn run_edges(admin: &Admin, out: Output, watch: bool, filter: &EdgeFilter) -> Exit {
    let path = filter.path();
    let list = get(admin, &path).await?;
    if !show_edges(&list, out) || !watch {
        return Ok(0);
    }
    let kinds = "edge_connected,edge_disconnected,edge_unreachable,edge_reachable,\
                 edge_superseded,edge_forgotten";
    let mut events = admin
        .events(&format!("/v1/events?kinds={kinds}"), None)
        .await?;
    while let Some(event) = events.next().await {
        let event = event?;
        if event.name == "lagged" {
            continue;
        }
        let list = get(admin, &path).await?;
        let shown = match out {
            Output::Table => emit("\n") && show_edges(&list, out),
            Output::Json => emit(&format!("{}\n", list)),
        };
        if !shown {
            return Ok(0);
        }
    }
    Err(CtlError::Unreachable(
        "the admin API ended the event stream".into(),
    ))
}

fn show_edges(list: &Value, out: Output) -> bool {
    match out {
        Output::Table => {
            let shown = list["edges"].as_array().map_or(0, Vec::len);
            let total = list["total"].as_u64().unwrap_or(shown as u64);
            let mut text = render::edges(list);
            // A page or a filter: say how many of how many, and where the next starts.
            if let Some(next) = list["next"].as_str() {
                text.push_str(&format!("{shown} of {total} Edges; more: --after {next}\n"));
            } else if shown as u64 != total {
                text.push_str(&format!("{shown} of {total} Edges\n"));
            }
            emit(&text)
        }
        Output::Json => emit_json(list),
    }
}

/// `iopctl edge ID`: one Edge's view.
pub async fn run_edge(admin: &Admin, out: Output, edge_id: &str) -> Exit {
    let view = get(admin, &format!("/v1/edges/{}", segment(edge_id))).await?;
    match out {
        Output::Table => emit(&render::edge(&view)),
        Output::Json => emit_json(&view),
    };
    Ok(0)
}

/// `iopctl status ID [--node N]...`: a live status round trip.
pub async fn run_status(admin: &Admin, out: Output, edge_id: &str, nodes: &[String]) -> Exit {
    let mut path = format!("/v1/edges/{}/status", segment(edge_id));
    if !nodes.is_empty() {
        let list: Vec<String> = nodes.iter().map(|n| segment(n)).collect();
        path.push_str(&format!("?nodes={}", list.join(",")));
    }
    let status = get(admin, &path).await?;
    match out {
        Output::Table => emit(&render::status(&status)),
        Output::Json => emit_json(&status),
    };
    Ok(0)
}

/// What `iopctl send` sends.
#[derive(Debug, Clone, Default)]
pub struct SendArgs {
    /// The Edge.
    pub edge_id: String,
    /// The operation.
    pub operation: String,
    /// The target selector (PROTOCOL.md §6); the whole Edge when `None`.
    pub selector: Option<String>,
    /// Metadata for the Edge's handler.
    pub metadata: BTreeMap<String, String>,
    /// The command's timeout on the Edge.
    pub timeout_ms: Option<u32>,
    /// The caller's idempotency key (PROTOCOL.md §4.4).
    pub id: Option<String>,
    /// Follow the command to its end; the exit code says how it ended.
    pub wait: bool,
}

impl SendArgs {
    /// The command as the admin API takes it, its `id` under `id_key` (`commandId` for
    /// a command, `jobId` for a job).
    pub(super) fn body(&self, id_key: &str) -> Value {
        let mut body = json!({ "operation": self.operation });
        if let Some(selector) = &self.selector {
            body["targetSelector"] = json!(selector);
        }
        if !self.metadata.is_empty() {
            body["metadata"] = json!(self.metadata);
        }
        if let Some(timeout) = self.timeout_ms {
            body["timeoutMs"] = json!(timeout);
        }
        if let Some(id) = &self.id {
            body[id_key] = json!(id);
        }
        body
    }
}

/// `iopctl send ID OPERATION ...`: sends a command and prints the Edge's answer; with
/// `--wait`, every phase to the end.
pub async fn run_send(admin: &Admin, out: Output, args: &SendArgs) -> Exit {
    let body = args.body("commandId");
    let path = format!("/v1/edges/{}/commands", segment(&args.edge_id));
    let sent = ok(admin.call("POST", &path, Some(&body)).await?)?;
    let command_id = sent["commandId"].as_str().unwrap_or_default().to_owned();
    let accepted = sent["response"]["accepted"] == true;
    if out == Output::Table {
        emit(&format!(
            "{command_id} {} on {}: {}\n",
            args.operation,
            args.edge_id,
            render::answer(&sent["response"])
        ));
    }
    if !accepted || !args.wait {
        if out == Output::Json {
            emit_json(&sent);
        }
        return Ok(if accepted { 0 } else { 1 });
    }
    let timeout = match args.timeout_ms {
        Some(ms) if ms > 0 => Duration::from_millis(ms.into()),
        _ => EDGE_DEFAULT_TIMEOUT,
    };
    follow(admin, out, &command_id, timeout + WAIT_MARGIN).await
}

/// Reads `command_id`'s record until it ends (at most `wait`), printing each new
/// phase; 0 when it SUCCEEDED, 1 otherwise.
async fn follow(admin: &Admin, out: Output, command_id: &str, wait: Duration) -> Exit {
    let path = format!("/v1/commands/{}", segment(command_id));
    let deadline = Instant::now() + wait;
    let mut shown = 0u64;
    loop {
        let record = get(admin, &path).await?;
        if out == Output::Table {
            for e in record["events"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or(&[])
            {
                let sequence = e["sequence"].as_u64().unwrap_or(0);
                if sequence > shown {
                    shown = sequence;
                    if !emit(&render::command_event(e)) {
                        return Ok(0);
                    }
                }
            }
        }
        if let Some(outcome) = record["outcome"].as_str() {
            match out {
                Output::Json => {
                    emit_json(&record);
                }
                Output::Table => {
                    if let Some(m) = record["outcomeMessage"].as_str().filter(|m| !m.is_empty()) {
                        emit(&format!("  {m}\n"));
                    }
                }
            }
            return Ok(if outcome == "COMMAND_PHASE_SUCCEEDED" {
                0
            } else {
                1
            });
        }
        if Instant::now() >= deadline {
            return Err(CtlError::Unreachable(format!(
                "command {command_id} has not ended after {}s: `iopctl command {command_id}` \
                 shows it later",
                wait.as_secs()
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `iopctl cancel CMD [--wait]`: asks the Edge to stop the command; with `--wait`,
/// follows the cancellation to its end and prints how the command ended.
pub async fn run_cancel(admin: &Admin, out: Output, command_id: &str, wait: bool) -> Exit {
    let path = format!("/v1/commands/{}/cancel", segment(command_id));
    let sent = ok(admin.call("POST", &path, None).await?)?;
    let cancel_id = sent["commandId"].as_str().unwrap_or_default().to_owned();
    let accepted = sent["response"]["accepted"] == true;
    if out == Output::Table {
        emit(&format!(
            "{cancel_id} cancels {command_id}: {}\n",
            render::answer(&sent["response"])
        ));
    }
    if !accepted || !wait {
        if out == Output::Json {
            emit_json(&sent);
        }
        return Ok(if accepted { 0 } else { 1 });
    }
    let code = follow(admin, out, &cancel_id, EDGE_DEFAULT_TIMEOUT + WAIT_MARGIN).await?;
    if out == Output::Table {
        let target = get(admin, &format!("/v1/commands/{}", segment(command_id))).await?;
        emit(&render::command(&target));
    }
    Ok(code)
}

/// `iopctl command CMD`: a command's record.
pub async fn run_command(admin: &Admin, out: Output, command_id: &str) -> Exit {
    let record = get(admin, &format!("/v1/commands/{}", segment(command_id))).await?;
    match out {
        Output::Table => emit(&render::command(&record)),
        Output::Json => emit_json(&record),
    };
    Ok(0)
}

/// What `iopctl events` reads.
#[derive(Debug, Clone, Default)]
pub struct EventsArgs {
    /// Keep reading until interrupted (else stop once the stream is quiet for `quiet`).
    pub follow: bool,
    /// With `--cluster`: resume after this event id.
    pub since: Option<String>,
    /// Some event kinds only (comma-separated names).
    pub kinds: Option<String>,
    /// Without `follow`: how long a quiet stream is read before stopping.
    pub quiet: Duration,
}

/// `iopctl events [--follow] [--since ID] [--kinds K,..]`.
pub async fn run_events(admin: &Admin, out: Output, args: &EventsArgs) -> Exit {
    let path = match &args.kinds {
        Some(kinds) => format!("/v1/events?kinds={}", segment_list(kinds)),
        None => "/v1/events".to_owned(),
    };
    let mut events = admin.events(&path, args.since.as_deref()).await?;
    loop {
        let next = if args.follow {
            events.next().await
        } else {
            match tokio::time::timeout(args.quiet, events.next()).await {
                Ok(next) => next,
                Err(_) => return Ok(0),
            }
        };
        let Some(event) = next else {
            return if args.follow {
                Err(CtlError::Unreachable(
                    "the admin API ended the event stream".into(),
                ))
            } else {
                Ok(0)
            };
        };
        let event = event?;
        let shown = match out {
            Output::Table => emit(&render::stream_event(&event.id, &event.name, &event.data)),
            Output::Json => {
                let data: Value =
                    serde_json::from_str(&event.data).unwrap_or(Value::String(event.data));
                emit(&format!(
                    "{}\n",
                    json!({ "id": event.id, "event": event.name, "data": data })
                ))
            }
        };
        if !shown {
            return Ok(0);
        }
    }
}

/// A comma-separated list with each item as a path-safe segment.
fn segment_list(list: &str) -> String {
    list.split(',').map(segment).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments_keep_id_bytes_and_encode_the_rest() {
        assert_eq!(segment("edge-1.a_B~"), "edge-1.a_B~");
        assert_eq!(segment("a/b c?"), "a%2Fb%20c%3F");
        assert_eq!(
            segment_list("node_event,command_event"),
            "node_event,command_event"
        );
    }
}
