//! The cases the sender oracle runs: what one sending API of one side is given.

#[cfg(doc)]
use crate::{NodeRegistry, cp::ControlPlane, edge::Edge};

/// A command the Control Plane's application asks it to send.
#[derive(Debug, Clone)]
pub struct CommandCase {
    /// The operation (the Edge advertises it, if it is a valid name).
    pub operation: String,
    /// The target selector.
    pub selector: String,
    /// Metadata entries.
    pub metadata: Vec<(String, String)>,
    /// An id chosen by the application (else generated).
    pub command_id: Option<String>,
}

/// A status request the Control Plane's application makes.
#[derive(Debug, Clone)]
pub struct StatusCase {
    /// The node ids (empty: every node).
    pub node_ids: Vec<String>,
}

/// A progress or outcome report by the Edge's application.
#[derive(Debug, Clone)]
pub struct ReportCase {
    /// The event's message.
    pub message: String,
    /// Its detail entries.
    pub detail: Vec<(String, String)>,
    /// Report the terminal (SUCCEEDED) rather than RUNNING.
    pub terminal: bool,
    /// The `max_frame_len` the Control Plane announces (at least 64 KiB is legal).
    pub cp_max_frame_len: u32,
    /// Report while disconnected, then reconnect to a CP announcing
    /// `next_cp_max_frame_len`, which gets the report replayed.
    pub while_disconnected: bool,
    /// The second CP's `max_frame_len`.
    pub next_cp_max_frame_len: u32,
}

/// An Edge configuration, and how many commands it holds when it says hello.
#[derive(Debug, Clone)]
pub struct ConfigCase {
    /// The edge id.
    pub edge_id: String,
    /// Operations.
    pub operations: Vec<String>,
    /// Hello metadata.
    pub metadata: Vec<(String, String)>,
    /// Software version.
    pub software_version: String,
    /// Credential bytes.
    pub credential: Vec<u8>,
    /// `max_inflight_commands`.
    pub max_inflight_commands: usize,
    /// `max_retained_commands`.
    pub max_retained_commands: usize,
    /// `max_frame_len`.
    pub max_frame_len: u32,
    /// Commands accepted and finished before the Edge reconnects (ids of 128 bytes),
    /// so that the second hello lists them...
    pub finished: usize,
    /// ... and commands accepted and left running.
    pub running: usize,
}

/// The shape of one node of a registry.
#[derive(Debug, Clone)]
pub struct NodeShape {
    /// The node id.
    pub node_id: String,
    /// Providers.
    pub providers: usize,
    /// Models per provider.
    pub models: usize,
    /// Bytes per model name.
    pub model_len: usize,
    /// Labels.
    pub labels: usize,
    /// Connected and ready.
    pub ready: bool,
}

/// A status answer from a registry of some shape.
#[derive(Debug, Clone)]
pub struct RegistryCase {
    /// Nodes configured (a configuration the registry refuses is skipped).
    pub nodes: Vec<NodeShape>,
    /// The node ids the CP asks for (empty: every node).
    pub node_ids: Vec<String>,
    /// The `max_frame_len` the Control Plane announces.
    pub cp_max_frame_len: u32,
    /// Answer from a custom registry that keeps only to the byte budget it is given
    /// (no node or decoded-size cap), instead of a [`NodeRegistry`].
    pub naive: bool,
}

/// One call of a sending API.
#[derive(Debug, Clone)]
pub enum Case {
    /// [`ControlPlane::send_command`].
    Command(CommandCase),
    /// [`ControlPlane::request_status`].
    Status(StatusCase),
    /// [`Edge::report_running`] / [`Edge::report_outcome`].
    Report(ReportCase),
    /// [`Edge::new`], then its hellos.
    Config(ConfigCase),
    /// A status answer of the Edge.
    Registry(RegistryCase),
}

/// What the sending API did, when the property held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It refused with a typed error (its text).
    Refused(String),
    /// It queued this many frames, and the peer's decoder took every one.
    Sent(usize),
}
