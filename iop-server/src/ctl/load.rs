//! `iopctl place MODEL` (the router's placement) and `iopctl top` (a live view of the
//! fleet's load, kept from the load watch `GET /v1/load/watch`).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::commands::{emit, emit_json, ok, segment};
use super::http::Admin;
use super::{CtlError, Exit};
use crate::table::Table;

/// What `iopctl place` asks.
#[derive(Debug, Clone, Default)]
pub struct PlaceArgs {
    /// The model.
    pub model: String,
    /// A long-context request.
    pub long_context: bool,
    /// Candidates at most.
    pub limit: Option<usize>,
    /// Node labels, `k=v` each.
    pub labels: Vec<String>,
    /// List stale providers too.
    pub include_stale: bool,
    /// Reserve the first candidate (`POST`).
    pub reserve: bool,
    /// Reserve a candidate drawn by free slots (`pick=spread`).
    pub spread: bool,
}

impl PlaceArgs {
    fn path(&self) -> String {
        let mut q = vec![format!("model={}", segment(&self.model))];
        if self.long_context {
            q.push("long_context=true".into());
        }
        if let Some(limit) = self.limit {
            q.push(format!("limit={limit}"));
        }
        if !self.labels.is_empty() {
            let labels: Vec<String> = self
                .labels
                .iter()
                .map(|l| match l.split_once('=') {
                    Some((k, v)) => format!("{}={}", segment(k), segment(v)),
                    None => segment(l),
                })
                .collect();
            q.push(format!("labels={}", labels.join(",")));
        }
        if self.include_stale {
            q.push("include_stale=true".into());
        }
        if self.spread {
            q.push("pick=spread".into());
        }
        format!("/v1/placement?{}", q.join("&"))
    }
}

/// `iopctl place MODEL`: the providers that can take one more request, best first;
/// exit 1 when none can.
pub async fn run_place(admin: &Admin, out: super::Output, args: &PlaceArgs) -> Exit {
    let method = if args.reserve { "POST" } else { "GET" };
    let answer = ok(admin.call(method, &args.path(), None).await?)?;
    let found = answer["candidates"]
        .as_array()
        .is_some_and(|c| !c.is_empty());
    match out {
        super::Output::Table => emit(&placement(&answer)),
        super::Output::Json => emit_json(&answer),
    };
    Ok(if found { 0 } else { 1 })
}

/// A placement answer as a table and a line of reasons.
fn placement(a: &Value) -> String {
    let mut table = Table::new([
        "EDGE",
        "NODE",
        "PROVIDER",
        "FREE",
        "IN FLIGHT",
        "QUEUED",
        "AGE",
    ]);
    for c in a["candidates"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        let stale = if c["stale"] == true { " stale" } else { "" };
        table.row([
            text(&c["edgeId"]),
            text(&c["nodeId"]),
            text(&c["providerId"]),
            c["free"].to_string(),
            format!("{}/{}", c["inFlight"], c["capacity"]),
            c["queued"].to_string(),
            format!("{}ms{stale}", c["ageMs"]),
        ]);
    }
    let e = &a["excluded"];
    let mut out = if table.is_empty() {
        format!(
            "no provider can take a request of {} now\n",
            text(&a["model"])
        )
    } else {
        table.to_string()
    };
    out.push_str(&format!(
        "{} serving; not candidates: {} offline, {} full, {} not eligible, {} stale, {} labels{}\n",
        a["serving"],
        e["offline"],
        e["full"],
        e["notEligible"],
        e["stale"],
        e["labels"],
        if a["reserved"] == true {
            "; the first is reserved"
        } else {
            ""
        }
    ));
    out
}

fn text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

/// What `iopctl top` shows.
#[derive(Debug, Clone)]
pub struct TopArgs {
    /// Only providers of this model.
    pub model: Option<String>,
    /// At most one redraw per this.
    pub every: Duration,
    /// Stop after this many redraws (`None`: until interrupted).
    pub frames: Option<u64>,
    /// Edges listed at most.
    pub edges: usize,
}

/// One provider's numbers as the watch last showed them.
#[derive(Debug, Clone, Default)]
struct Provider {
    models: Vec<String>,
    offline: bool,
    numbers: [u64; 3],
}

/// One Edge as the watch shows it: live, and (node, provider) → numbers.
type Edge = (bool, HashMap<(String, String), Provider>);

/// Providers, capacity, in flight, queued.
type Totals = [u64; 4];

/// The fleet as the watch shows it, by Edge id.
#[derive(Debug, Default)]
struct Fleet {
    edges: BTreeMap<String, Edge>,
}

impl Fleet {
    fn providers(edge: &mut Edge, list: &Value) {
        for p in list.as_array().map(Vec::as_slice).unwrap_or(&[]) {
            let key = (text(&p["nodeId"]), text(&p["providerId"]));
            let number = |k: &str| p[k].as_u64().unwrap_or(0);
            edge.1.insert(
                key,
                Provider {
                    models: p["models"]
                        .as_array()
                        .map(|m| m.iter().map(text).collect())
                        .unwrap_or_default(),
                    offline: p["offline"] == true,
                    numbers: [number("capacity"), number("inFlight"), number("queued")],
                },
            );
        }
    }

    /// Folds one event of the watch in.
    fn apply(&mut self, name: &str, data: &Value) {
        match name {
            "snapshot" => {
                if data["part"] == 0 {
                    self.edges.clear();
                }
                for e in data["edges"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
                    let edge = self.edges.entry(text(&e["edgeId"])).or_default();
                    edge.0 = e["live"] == true;
                    Self::providers(edge, &e["providers"]);
                }
            }
            "change" => {
                let id = text(&data["edgeId"]);
                match data["kind"].as_str() {
                    Some("gone") => {
                        self.edges.remove(&id);
                    }
                    Some("offline") => {
                        if let Some(e) = self.edges.get_mut(&id) {
                            e.0 = false;
                        }
                    }
                    Some("view") => {
                        let edge = self.edges.entry(id).or_default();
                        edge.0 = true;
                        edge.1.clear();
                        Self::providers(edge, &data["providers"]);
                    }
                    _ => {
                        let edge = self.edges.entry(id).or_default();
                        edge.0 = true;
                        Self::providers(edge, &data["providers"]);
                    }
                }
            }
            _ => {}
        }
    }

    /// Totals by model and by Edge, live providers online only: (providers,
    /// capacity, in flight, queued).
    fn totals(&self) -> (BTreeMap<String, Totals>, Vec<(String, Totals)>) {
        let mut models: BTreeMap<String, Totals> = BTreeMap::new();
        let mut edges = Vec::new();
        for (id, (live, providers)) in &self.edges {
            let mut t = [0u64; 4];
            for p in providers.values().filter(|p| *live && !p.offline) {
                let add = |t: &mut [u64; 4]| {
                    t[0] += 1;
                    t[1] += p.numbers[0];
                    t[2] += p.numbers[1];
                    t[3] += p.numbers[2];
                };
                add(&mut t);
                for m in &p.models {
                    add(models.entry(m.clone()).or_default());
                }
            }
            edges.push((id.clone(), t));
        }
        // Busiest first: the highest share of capacity in use, then queue.
        edges.sort_by(|a, b| {
            let use_of = |t: &[u64; 4]| t[2] * 1000 / t[1].max(1);
            use_of(&b.1).cmp(&use_of(&a.1)).then(b.1[3].cmp(&a.1[3]))
        });
        (models, edges)
    }

    fn render(&self, limit: usize) -> String {
        let (models, edges) = self.totals();
        let live = self.edges.values().filter(|e| e.0).count();
        let mut out = format!("iop top: {} Edges ({live} live)\n\n", self.edges.len());
        let row = |t: &[u64; 4]| {
            [
                t[0].to_string(),
                t[1].to_string(),
                t[2].to_string(),
                t[3].to_string(),
                t[1].saturating_sub(t[2]).to_string(),
                format!("{}%", t[2] * 100 / t[1].max(1)),
            ]
        };
        let mut by_model = Table::new([
            "MODEL",
            "PROVIDERS",
            "CAPACITY",
            "IN FLIGHT",
            "QUEUED",
            "FREE",
            "USE",
        ]);
        for (m, t) in &models {
            by_model.row(std::iter::once(m.clone()).chain(row(t)));
        }
        out.push_str(&by_model.to_string());
        out.push('\n');
        let mut by_edge = Table::new([
            "EDGE",
            "PROVIDERS",
            "CAPACITY",
            "IN FLIGHT",
            "QUEUED",
            "FREE",
            "USE",
        ]);
        for (id, t) in edges.iter().take(limit) {
            by_edge.row(std::iter::once(id.clone()).chain(row(t)));
        }
        out.push_str(&by_edge.to_string());
        if edges.len() > limit {
            out.push_str(&format!("… and {} more Edges\n", edges.len() - limit));
        }
        out
    }

    fn json(&self) -> Value {
        let (models, edges) = self.totals();
        let t = |t: &[u64; 4]| json!({"providers": t[0], "capacity": t[1], "inFlight": t[2], "queued": t[3]});
        json!({
            "models": models.iter().map(|(m, v)| (m.clone(), t(v))).collect::<serde_json::Map<_, _>>(),
            "edges": edges.iter().map(|(id, v)| json!({"edgeId": id, "load": t(v)})).collect::<Vec<_>>(),
        })
    }
}

/// `iopctl top`: the fleet's load by model and by Edge, redrawn as the watch reports
/// changes (at most once per `every`); runs until interrupted or `frames` redraws.
pub async fn run_top(admin: &Admin, out: super::Output, args: &TopArgs) -> Exit {
    let path = match &args.model {
        Some(m) => format!("/v1/load/watch?model={}", segment(m)),
        None => "/v1/load/watch".into(),
    };
    let mut events = admin.events(&path, None).await?;
    let mut fleet = Fleet::default();
    let mut complete = false;
    let mut drawn = 0u64;
    let mut last_draw: Option<Instant> = None;
    loop {
        let next = match last_draw {
            // Changes waiting to be shown: draw once `every` has passed, even if the
            // stream goes quiet.
            Some(at) if complete => {
                let left = args.every.saturating_sub(at.elapsed());
                tokio::time::timeout(left, events.next()).await.ok()
            }
            _ => Some(events.next().await),
        };
        match next {
            Some(Some(event)) => {
                let event = event?;
                let data: Value = serde_json::from_str(&event.data).unwrap_or(Value::Null);
                fleet.apply(&event.name, &data);
                if event.name == "snapshot" {
                    complete = data["last"] == true;
                }
                if event.name == "resync" {
                    complete = false;
                }
                if !complete || last_draw.is_some_and(|at| at.elapsed() < args.every) {
                    continue;
                }
            }
            Some(None) => {
                return Err(CtlError::Unreachable(
                    "the admin API ended the load watch".into(),
                ));
            }
            None => {}
        }
        let shown = match out {
            super::Output::Table => emit(&format!("\x1b[H\x1b[2J{}", fleet.render(args.edges))),
            super::Output::Json => emit(&format!("{}\n", fleet.json())),
        };
        drawn += 1;
        last_draw = Some(Instant::now());
        if !shown || args.frames.is_some_and(|n| drawn >= n) {
            return Ok(0);
        }
    }
}
