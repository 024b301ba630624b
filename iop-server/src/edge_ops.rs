//! The Edge's built-in operations (`iop-edge`): `edge.ping`, `provider-pool.refresh`,
//! `node.drain` and `node.resume`, each reporting real phases (ACCEPTED by the core,
//! RUNNING with what it is doing, then SUCCEEDED or FAILED with counts). `node.drain`
//! stops waiting for leases when cancelled (`command.cancel`, built into every Edge).

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use iop_core::NodeRegistry;
use iop_core::edge::{Target, TargetLevel};
use iop_core::registry::ConfigureOutcome;

use super::edge_config::EdgeFile;
use super::unix_ms;
use iop_tokio::{CommandContext, CommandResult, EdgeClient, EdgeHandle, Tokio};

/// `edge.ping`: an edge-level liveness check answered by the Edge itself.
pub const EDGE_PING: &str = "edge.ping";
/// `provider-pool.refresh`: re-reads the Edge config file and applies it.
pub const PROVIDER_POOL_REFRESH: &str = "provider-pool.refresh";
/// `node.drain`: no new leases on the matched nodes; waits for in-flight leases.
pub const NODE_DRAIN: &str = "node.drain";
/// `node.resume`: ends a drain on the matched nodes.
pub const NODE_RESUME: &str = "node.resume";

/// How often `node.drain` looks at the leases it waits for.
const DRAIN_POLL: Duration = Duration::from_millis(100);

/// What applying a config file to a registry did (`provider-pool.refresh`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RefreshSummary {
    /// Nodes new in the file, now configured.
    pub added: usize,
    /// Nodes whose config changed.
    pub updated: usize,
    /// Nodes whose config is the same.
    pub unchanged: usize,
    /// Nodes no longer in the file, removed.
    pub removed: usize,
    /// Nodes whose new config the registry refused (e.g. a busy provider), with why.
    pub refused: Vec<(String, String)>,
}

impl RefreshSummary {
    /// The counts as command detail entries.
    pub fn detail(&self) -> BTreeMap<String, String> {
        [
            ("added", self.added),
            ("updated", self.updated),
            ("unchanged", self.unchanged),
            ("removed", self.removed),
            ("refused", self.refused.len()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_string()))
        .collect()
    }
}

/// What applying `file` would change, without changing anything: `(to add, to
/// update, to remove)`.
pub fn plan_refresh(registry: &NodeRegistry, file: &EdgeFile) -> (usize, usize, usize) {
    let mut add = 0;
    let mut update = 0;
    for node in &file.nodes {
        match registry.node_config(&node.node_id) {
            None => add += 1,
            Some(current) if !same_config(&current, node) => update += 1,
            Some(_) => {}
        }
    }
    let remove = registry
        .node_ids()
        .filter(|id| !file.nodes.iter().any(|n| n.node_id == *id))
        .count();
    (add, update, remove)
}

fn same_config(a: &iop_core::registry::NodeConfig, b: &iop_core::registry::NodeConfig) -> bool {
    let mut a_providers = a.providers.clone();
    let mut b_providers = b.providers.clone();
    a_providers.sort_by(|x, y| x.provider_id.cmp(&y.provider_id));
    b_providers.sort_by(|x, y| x.provider_id.cmp(&y.provider_id));
    a.labels == b.labels
        && a.revision == b.revision
        && a.models == b.models
        && a.endpoint == b.endpoint
        && a_providers == b_providers
}

/// Makes `registry` match `file`: configures every node of the file (keeping the
/// ownership, leases and drain of nodes it already has) and removes the nodes the file
/// no longer lists.
pub fn apply_refresh(
    registry: &mut NodeRegistry,
    file: &EdgeFile,
    now_unix_ms: u64,
) -> RefreshSummary {
    let mut summary = RefreshSummary::default();
    for node in &file.nodes {
        match registry.configure(node.clone(), now_unix_ms) {
            Ok(ConfigureOutcome::Added) => summary.added += 1,
            Ok(ConfigureOutcome::Updated) => summary.updated += 1,
            Ok(_) => summary.unchanged += 1,
            Err(e) => summary.refused.push((node.node_id.clone(), e.to_string())),
        }
    }
    let gone: Vec<String> = registry
        .node_ids()
        .filter(|id| !file.nodes.iter().any(|n| n.node_id == *id))
        .map(str::to_owned)
        .collect();
    for id in gone {
        let _ = registry.remove(&id, now_unix_ms);
        summary.removed += 1;
    }
    summary
}

/// The node ids a resolved node-level target names.
pub fn target_nodes(target: &Target) -> Vec<String> {
    match target {
        Target::Edge => Vec::new(),
        Target::Nodes(ids) => ids.clone(),
        Target::Provider { node_id, .. } => vec![node_id.clone()],
    }
}

/// Leases in flight on `nodes`, from the registry's own snapshot.
fn in_flight(registry: &NodeRegistry, nodes: &[String]) -> u32 {
    registry
        .snapshot("", 0, nodes, usize::MAX)
        .nodes
        .iter()
        .flat_map(|n| &n.provider_snapshots)
        .map(|p| p.in_flight)
        .sum()
}

/// Registers the built-in operations on `client`. Each handler reaches its Edge
/// through its [`CommandContext`]; `config_path` is the file `provider-pool.refresh`
/// re-reads (without one, that operation fails saying so).
pub fn register(client: EdgeClient, config_path: Option<PathBuf>) -> EdgeClient {
    client
        .operation(EDGE_PING, TargetLevel::Edge, |ctx| on_edge(ctx, ping))
        .operation(PROVIDER_POOL_REFRESH, TargetLevel::Edge, move |ctx| {
            let path = config_path.clone();
            on_edge(ctx, |ctx, handle| refresh(ctx, handle, path))
        })
        .operation(NODE_DRAIN, TargetLevel::Node, |ctx| on_edge(ctx, drain))
        .operation(NODE_RESUME, TargetLevel::Node, |ctx| on_edge(ctx, resume))
}

/// Runs `operation` with the Edge the command runs on, which its context gives from
/// the first command on (a handle the application stores once `connect` returns
/// could still be missing then); fails the command once the Edge is shutting down.
pub(crate) async fn on_edge<F, Fut>(ctx: CommandContext, operation: F) -> CommandResult
where
    F: FnOnce(CommandContext, EdgeHandle) -> Fut,
    Fut: Future<Output = CommandResult>,
{
    match ctx.edge::<Tokio, NodeRegistry>() {
        Some(handle) => operation(ctx, handle).await,
        None => CommandResult::failed("the edge is shutting down"),
    }
}

async fn ping(ctx: CommandContext, handle: EdgeHandle) -> CommandResult {
    let _ = ctx.running("ping received", BTreeMap::new());
    let (nodes, revision) = handle.with_registry(|r, _now| (r.len(), r.revision()));
    CommandResult::succeeded("pong")
        .with_detail("nodes", nodes.to_string())
        .with_detail("registry_revision", revision.to_string())
}

async fn refresh(ctx: CommandContext, handle: EdgeHandle, path: Option<PathBuf>) -> CommandResult {
    let Some(path) = path else {
        return CommandResult::failed("this edge was started without a config file");
    };
    let _ = ctx.running(format!("re-reading {}", path.display()), BTreeMap::new());
    let load_path = path.clone();
    let file = match tokio::task::spawn_blocking(move || EdgeFile::load(&load_path)).await {
        Ok(Ok(file)) => file,
        Ok(Err(e)) => return CommandResult::failed(e.to_string()),
        Err(e) => return CommandResult::failed(format!("reading the config failed: {e}")),
    };
    let (add, update, remove) = handle.with_registry(|r, _now| plan_refresh(r, &file));
    let plan: BTreeMap<String, String> = [
        ("to_add", add),
        ("to_update", update),
        ("to_remove", remove),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_string()))
    .collect();
    let _ = ctx.running(
        format!(
            "applying {} nodes: {add} to add, {update} to update, {remove} to remove",
            file.nodes.len()
        ),
        plan,
    );
    let summary = handle.with_registry(|r, _now| apply_refresh(r, &file, unix_ms()));
    tracing::info!(
        added = summary.added,
        updated = summary.updated,
        removed = summary.removed,
        refused = summary.refused.len(),
        "provider pool refreshed"
    );
    let counts = format!(
        "{} added, {} updated, {} unchanged, {} removed",
        summary.added, summary.updated, summary.unchanged, summary.removed
    );
    let mut result = if summary.refused.is_empty() {
        CommandResult::succeeded(format!("refreshed: {counts}"))
    } else {
        let why: Vec<String> = summary
            .refused
            .iter()
            .map(|(id, e)| format!("{id}: {e}"))
            .collect();
        CommandResult::failed(format!("{counts}; refused {}", why.join("; ")))
    };
    result.detail = summary.detail();
    result
}

async fn drain(ctx: CommandContext, handle: EdgeHandle) -> CommandResult {
    let nodes = target_nodes(ctx.target());
    let (changed, leases) = handle.with_registry(|r, _now| {
        let changed = nodes
            .iter()
            .filter(|id| r.drain(id.as_str()).unwrap_or(false))
            .count();
        (changed, in_flight(r, &nodes))
    });
    let mut detail = BTreeMap::new();
    detail.insert("nodes".to_owned(), nodes.len().to_string());
    detail.insert("newly_drained".to_owned(), changed.to_string());
    let _ = ctx.running(
        format!(
            "drained {} node(s) ({changed} newly): no new leases; {leases} lease(s) in flight",
            nodes.len()
        ),
        detail.clone(),
    );
    // Wait for in-flight leases to end (or the command's deadline, or a cancellation:
    // the nodes stay drained, only the waiting stops).
    let mut last = leases;
    while last > 0 {
        if ctx.is_timed_out() {
            return CommandResult::failed("deadline passed with leases still in flight");
        }
        if ctx.is_cancelled() {
            let mut result = CommandResult::cancelled(format!(
                "stopped waiting: {} node(s) stay drained, {last} lease(s) still in flight",
                nodes.len()
            ));
            result.detail = detail;
            return result.with_detail("in_flight", last.to_string());
        }
        futures_lite::future::or(tokio::time::sleep(DRAIN_POLL), ctx.cancelled()).await;
        let now = handle.with_registry(|r, _now| in_flight(r, &nodes));
        if now != last {
            last = now;
            let _ = ctx.running(format!("{now} lease(s) still in flight"), BTreeMap::new());
        }
    }
    let mut result = CommandResult::succeeded(format!(
        "{} node(s) drained, no lease in flight",
        nodes.len()
    ));
    result.detail = detail;
    result
}

async fn resume(ctx: CommandContext, handle: EdgeHandle) -> CommandResult {
    let nodes = target_nodes(ctx.target());
    let _ = ctx.running(format!("resuming {} node(s)", nodes.len()), BTreeMap::new());
    let changed = handle.with_registry(|r, _now| {
        nodes
            .iter()
            .filter(|id| r.resume(id.as_str()).unwrap_or(false))
            .count()
    });
    CommandResult::succeeded(format!(
        "{} node(s) resumed ({changed} were drained)",
        nodes.len()
    ))
    .with_detail("nodes", nodes.len().to_string())
    .with_detail("resumed", changed.to_string())
}
