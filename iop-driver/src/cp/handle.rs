//! The application's side of a running Control Plane.

use std::net::SocketAddr;
use std::sync::Arc;

use iop_core::cp::{
    ClaimAnswer, ClaimError, CommandRecord, CommandSpec, CommandState, ConnectionId, CpEvent,
    CpEventKind, CpStats, EdgeView, EnrolmentPolicy, RevokeError,
};

use super::config::TlsStats;
use super::error::{CancelError, SendCommandError, TlsReloadError};
use super::state::CpShared;
use super::tracker::CommandTracker;
use crate::Runtime;
use crate::notice::Subscription;
use crate::owner::Owner;
use crate::signal::lock;

/// What a [`ControlPlaneHandle::subscribe_with`] subscriber wants and may hold.
///
/// ```
/// use iop_driver::SubscribeOptions;
/// use iop_driver::iop_core::cp::CpEventKind;
///
/// let options = SubscribeOptions::default()
///     .kinds([CpEventKind::NodeEvent, CpEventKind::CommandEvent])
///     .byte_budget(1 << 20);
/// # let _ = options;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SubscribeOptions {
    /// The kinds wanted, one bit per [`CpEventKind`] (every kind by default).
    kinds: u64,
    /// Undelivered events held at most (default: `ServerConfig::subscriber_capacity`).
    pub capacity: Option<usize>,
    /// Bytes of undelivered events held at most (default:
    /// `ServerConfig::subscriber_byte_budget`).
    pub byte_budget: Option<usize>,
}

impl Default for SubscribeOptions {
    fn default() -> Self {
        Self {
            kinds: crate::notice::ALL_KINDS,
            capacity: None,
            byte_budget: None,
        }
    }
}

impl SubscribeOptions {
    /// Only events of these kinds.
    pub fn kinds(mut self, kinds: impl IntoIterator<Item = CpEventKind>) -> Self {
        self.kinds = kinds.into_iter().fold(0, |m, k| m | 1 << (k as u32));
        self
    }

    /// At most this many undelivered events.
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = Some(capacity);
        self
    }

    /// At most this many bytes of undelivered events.
    pub fn byte_budget(mut self, bytes: usize) -> Self {
        self.byte_budget = Some(bytes);
        self
    }

    /// Whether events of `kind` are wanted.
    pub fn wants(&self, kind: CpEventKind) -> bool {
        self.kinds & (1 << (kind as u32)) != 0
    }
}

/// A cloneable handle to a running [`ControlPlaneServer`](super::ControlPlaneServer).
///
/// Queries take the server's lock briefly and never wait on the network; the `async`
/// methods wait for the Edge.
///
/// The server runs while a handle does: when the last one (the
/// [`ControlPlaneServer`](super::ControlPlaneServer) included) is dropped it shuts
/// down gracefully in the background, as [`shutdown`](Self::shutdown) would,
/// unless it was [`detach`](Self::detach)ed.
pub struct ControlPlaneHandle<R: Runtime> {
    pub(super) shared: Arc<CpShared<R>>,
    owner: Arc<Owner>,
}

impl<R: Runtime> Clone for ControlPlaneHandle<R> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            owner: self.owner.clone(),
        }
    }
}

impl<R: Runtime> std::fmt::Debug for ControlPlaneHandle<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlaneHandle")
            .field("local_addr", &self.shared.local_addr)
            .finish()
    }
}

impl<R: Runtime> ControlPlaneHandle<R> {
    /// The first handle of a started server: it creates the owner.
    pub(crate) fn new(shared: Arc<CpShared<R>>) -> Self {
        let stopping = shared.clone();
        let owner = Arc::new(Owner::new(move || {
            super::shutdown::shutdown_in_background(stopping)
        }));
        Self { shared, owner }
    }

    /// The server's bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// Every Edge the Control Plane knows, connected or not, sorted by id.
    pub fn edges(&self) -> Vec<EdgeView> {
        self.shared.lock().cp.edges().cloned().collect()
    }

    /// Runs `f` over every Edge's view, in no order, without copying them: to page
    /// or count a large fleet ([`EdgeFilter::page`](iop_fleet::EdgeFilter::page)).
    /// The Control Plane is locked meanwhile: keep `f` short, and take no other lock
    /// in it.
    pub fn visit_edges<T>(&self, f: impl FnOnce(&mut dyn Iterator<Item = &EdgeView>) -> T) -> T {
        let state = self.shared.lock();
        f(&mut state.cp.edges())
    }

    /// One Edge's view.
    pub fn edge(&self, edge_id: &str) -> Option<EdgeView> {
        self.shared.lock().cp.edge(edge_id).cloned()
    }

    /// Whether `session_id` is `edge_id`'s session and not disconnected: what
    /// [`edge`](Self::edge) would say, without copying the view.
    pub fn session_live(&self, edge_id: &str, session_id: u64) -> bool {
        self.shared.lock().cp.edge(edge_id).is_some_and(|v| {
            v.session_id == session_id && v.reachability != iop_core::cp::Reachability::Disconnected
        })
    }

    /// Counters for metrics.
    pub fn stats(&self) -> CpStats {
        self.shared.lock().cp.stats()
    }

    /// Calls of [`request_status`](Self::request_status) that have not returned yet
    /// (a gauge for metrics): waiting for the Edge, or answered and about to return.
    /// A caller that drops its future stops counting at once, although the Edge may
    /// still answer (the answer is then dropped).
    pub fn status_callers_waiting(&self) -> usize {
        self.shared.lock().status_waiters.len()
    }

    /// Inputs (bytes read from a connection) that found the server's lock held by
    /// another task and were applied by that task before it let go, so far: how
    /// often connections contend for the lock (a counter for metrics). Each is
    /// applied in its connection's order; none waits for a later one.
    pub fn inputs_deferred(&self) -> u64 {
        self.shared.waiting.deferred()
    }

    /// TLS handshake counters and the last failure (all zero without TLS).
    pub fn tls_stats(&self) -> TlsStats {
        self.shared.lock().tls_stats.clone()
    }

    /// Sends a command to `edge_id` (with a generated id) and returns its tracker.
    ///
    /// The command outlives the session: if the Edge reconnects, the Control Plane
    /// re-sends it or learns its fate from the Edge's hello. With a
    /// [`CommandJournal`](crate::CommandJournal) set, it goes out once the journal
    /// recorded it; one it cannot record is never sent, and the tracker ends with
    /// [`Ending::Unrecorded`](iop_core::cp::Ending::Unrecorded).
    ///
    /// A spec with the caller's id ([`CommandSpec::with_id`]) the Control Plane knows
    /// for this Edge is that command again when its content is the same (the tracker
    /// follows it; nothing is sent), and [`SendCommandError::Conflict`] otherwise.
    pub fn send_command(
        &self,
        edge_id: &str,
        spec: CommandSpec,
    ) -> Result<CommandTracker<R>, SendCommandError> {
        let operation = spec.operation.clone();
        let journaled = lock(&self.shared.journal).is_some();
        let command_id = self.shared.with_direct(|state, now| {
            if state.stopped {
                return Err(SendCommandError::Stopped);
            }
            // A key the core knows for this Edge: that command again, or a conflict
            // (one that ended without being sent is tried anew).
            if let Some(id) = spec.key()
                && let Some(known) = state.cp.command(edge_id, id)
                && !known.ended_unsent()
            {
                if !spec.same_content(&known.request) {
                    return Err(SendCommandError::Conflict {
                        command_id: id.to_owned(),
                    });
                }
                return Ok(id.to_owned());
            }
            // Held back while the journal records it (on the core's `CommandHeld`,
            // `CpShared::pump`), else sent at once.
            let id = if journaled {
                state.cp.hold_command(edge_id, spec)?
            } else {
                state.cp.send_command(now, edge_id, spec)?
            };
            Ok(id)
        })?;
        tracing::debug!(edge_id, command_id, operation, "command sent");
        Ok(CommandTracker::new(
            self.shared.clone(),
            edge_id.to_owned(),
            command_id,
        ))
    }

    /// Asks the Edge running `command_id` to stop it (PROTOCOL.md §4.4): sends it
    /// [`CommandSpec::cancel`], whose tracker this returns. The cancellation ends
    /// SUCCEEDED once the target ended (CANCELLED, or in its own phase if it finished
    /// first), FAILED when the Edge no longer runs it. Asking twice is one command
    /// (the cancellation's id is derived from the target's).
    pub fn cancel(&self, command_id: &str) -> Result<CommandTracker<R>, CancelError> {
        let (edge_id, outcome) = {
            let state = self.shared.lock();
            let unknown = || CancelError::UnknownCommand(command_id.to_owned());
            let edge_id = state.cp.command_edge(command_id).ok_or_else(unknown)?;
            let known = state.cp.command(edge_id, command_id).ok_or_else(unknown)?;
            (edge_id.to_owned(), known.outcome)
        };
        if let Some(outcome) = outcome {
            return Err(CancelError::Finished {
                command_id: command_id.to_owned(),
                outcome,
            });
        }
        Ok(self.send_command(&edge_id, CommandSpec::cancel(command_id))?)
    }

    /// Records every command [`send_command`](Self::send_command) sends from now on in
    /// `journal` before it goes out (`None`: sent at once, the default). A cluster
    /// replica sets its engine's here (PROTOCOL.md §8 write-ahead).
    pub fn set_command_journal(&self, journal: Option<Arc<dyn crate::CommandJournal>>) {
        *lock(&self.shared.journal) = journal;
    }

    /// The record of a command sent through a handle of this server (response and
    /// every event so far), while it is among the last
    /// [`RecordLimits::records`](iop_core::cp::RecordLimits::records) commands
    /// (`CpConfig::command_records`): a copy of the core's record as it is now.
    pub fn command(&self, command_id: &str) -> Option<CommandRecord> {
        self.shared.lock().cp.command_record(command_id)
    }

    /// Every event of the Control Plane from now on, at most `subscriber_capacity`
    /// events of at most `subscriber_byte_budget` bytes undelivered (then
    /// [`Notice::Lagged`](crate::Notice::Lagged)). Ends at shutdown. For some kinds
    /// only, or other bounds, see [`subscribe_with`](Self::subscribe_with).
    pub fn subscribe(&self) -> Subscription<CpEvent> {
        self.subscribe_with(SubscribeOptions::default())
    }

    /// The events of the kinds `options` names from now on, within its bounds. An
    /// event of another kind is never copied for this subscriber: one that leaves out
    /// [`CpEventKind::StatusReceived`] costs nothing when a large status arrives.
    pub fn subscribe_with(&self, options: SubscribeOptions) -> Subscription<CpEvent> {
        let capacity = options.capacity.unwrap_or(self.shared.subscriber_capacity);
        let budget = options
            .byte_budget
            .unwrap_or(self.shared.subscriber_byte_budget);
        let mut state = self.shared.lock();
        let subscription = state.events.subscribe(options.kinds, capacity, budget);
        if state.finished {
            // Nothing will ever be published: end it at once.
            state.events.close();
        }
        subscription
    }

    /// Forgets a disconnected Edge: its view and its commands (their trackers end with
    /// [`Ending::Forgotten`](iop_core::cp::Ending::Forgotten)). False when the
    /// Edge is unknown or connected. Views are also forgotten on their own, 24 h after
    /// their last session and past 100 000 disconnected Edges (`CpConfig`).
    pub fn forget_edge(&self, edge_id: &str) -> bool {
        self.shared
            .with_state(|state| state.cp.forget_edge(edge_id))
    }

    /// Ends `edge_id`'s session with `GoAway{CREDENTIAL_REVOKED}` and removes it from
    /// the allow list (with [`EnrolmentPolicy::AcceptAny`] it may enrol again).
    pub fn revoke(&self, edge_id: &str) -> Result<(), RevokeError> {
        self.shared.with(|state, now| state.cp.revoke(now, edge_id))
    }

    /// Answers the [`CpEvent::OwnershipClaim`] of `conn` (servers whose
    /// [`ServerConfig::directory`](crate::ServerConfig::directory) defers claims, as
    /// [`DirectoryFactory::external`](crate::DirectoryFactory::external) does; see
    /// [`directory`](iop_core::cp::directory) for the contract). A `Granted` answer
    /// refused with an error is a record to release.
    pub fn answer_claim(&self, conn: ConnectionId, answer: ClaimAnswer) -> Result<(), ClaimError> {
        self.shared
            .with(|state, now| state.cp.handle_claim(now, conn, answer))
    }

    /// The claims deferred to the directory and not answered yet, in connection order
    /// (see [`ControlPlane::claims_waiting`](iop_core::cp::ControlPlane::claims_waiting)):
    /// a directory that subscribed to [`CpEvent::OwnershipClaim`](iop_core::cp::CpEvent::OwnershipClaim)
    /// after the server started serving, or whose subscription lagged, takes them up
    /// from here.
    pub fn claims_waiting(&self) -> Vec<iop_core::cp::Claim> {
        self.shared.lock().cp.claims_waiting()
    }

    /// Whether the hello on `conn` waits on the directory's answer to its claim.
    pub fn claim_waiting(&self, conn: ConnectionId) -> bool {
        self.shared.lock().cp.claim_waiting(conn)
    }

    /// Hands the commands another Control Plane sent to the Edge whose claim waits on
    /// `conn` to this one, each as the core's [`CommandState`] and the record an
    /// operator reads ([`command`](Self::command)); call it before
    /// [`answer_claim`](Self::answer_claim) grants the claim. Commands the core leaves
    /// out (see [`ControlPlane::adopt_commands`](iop_core::cp::ControlPlane::adopt_commands))
    /// are not recorded either. Returns the ids kept.
    pub fn adopt_commands(
        &self,
        conn: ConnectionId,
        commands: Vec<(CommandState, CommandRecord)>,
    ) -> Result<Vec<String>, ClaimError> {
        let commands = (commands.into_iter())
            .map(|(state, record)| (state, Some(record)))
            .collect();
        self.shared
            .lock()
            .cp
            .adopt_commands_with_records(conn, commands)
    }

    /// Ids of the commands of `edge_id` without an outcome yet, oldest first.
    pub fn unfinished_commands(&self, edge_id: &str) -> Vec<String> {
        self.shared.lock().cp.unfinished_commands(edge_id)
    }

    /// What the core knows of command `command_id` of `edge_id`, all another Control
    /// Plane needs to carry it on ([`CommandState`]); `None` for a command not known
    /// here.
    pub fn command_state(&self, edge_id: &str, command_id: &str) -> Option<CommandState> {
        self.shared.lock().cp.command(edge_id, command_id)
    }

    /// The directory says session `session_id` of `edge_id` lost its ownership record
    /// to `by_session_id` elsewhere: it gets `GoAway{SUPERSEDED}` and closes. False when
    /// that session is not live here.
    pub fn ownership_lost(&self, edge_id: &str, session_id: u64, by_session_id: u64) -> bool {
        self.shared.with(|state, now| {
            state
                .cp
                .handle_ownership_lost(now, edge_id, session_id, by_session_id)
        })
    }

    /// Replaces the TLS certificate, key and client CA that new handshakes use (a
    /// rotated certificate, say); sessions already up keep theirs. A server bound
    /// without TLS stays without: that is [`TlsReloadError::NotTls`].
    pub fn set_tls(&self, tls: crate::tls::ServerTls) -> Result<(), TlsReloadError> {
        let mut current = lock(&self.shared.tls);
        match current.as_mut() {
            None => Err(TlsReloadError::NotTls),
            Some(slot) => {
                *slot = tls;
                Ok(())
            }
        }
    }

    /// Replaces the enrolment policy. Live sessions that no longer pass it end with
    /// `GoAway{CREDENTIAL_REVOKED}`.
    pub fn set_enrolment_policy(&self, policy: EnrolmentPolicy) {
        self.shared
            .with(|state, now| state.cp.set_enrolment_policy(now, policy));
    }

    /// Stops accepting new sessions (hellos are refused DRAINING); live sessions go on.
    pub fn drain(&self) {
        tracing::info!("control plane draining");
        self.shared.with(|state, _| state.cp.drain());
    }

    /// Whether [`drain`](Self::drain) or shutdown began.
    pub fn is_draining(&self) -> bool {
        self.shared.lock().cp.is_draining()
    }

    /// Connections held now.
    pub fn connection_count(&self) -> usize {
        self.shared.lock().conns.len()
    }

    /// Graceful shutdown: stops accepting, sends `GoAway{SHUTDOWN}` to every connection,
    /// waits up to `shutdown_grace` for them to flush and close, then drops the rest.
    /// Pending status requests fail with
    /// [`StatusRequestError::Abandoned`](super::StatusRequestError::Abandoned), trackers
    /// and subscriptions end. Idempotent; returns once every connection is gone.
    pub async fn shutdown(&self) {
        super::shutdown::shutdown(&self.shared).await;
    }

    /// Lets the server run on after its last handle is dropped (until the process
    /// ends), for a server started once and never stopped. Without it, dropping the
    /// last handle (the server's included) shuts the server down in the background.
    pub fn detach(self) {
        self.owner.detach();
    }
}
