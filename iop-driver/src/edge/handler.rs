//! Operation handlers: async functions the application registers per operation.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use iop_core::edge::{Outcome, ReportError, Target};

/// How a handler finished: becomes the command's terminal phase. Built by
/// [`succeeded`](Self::succeeded), [`failed`](Self::failed),
/// [`cancelled`](Self::cancelled) or [`new`](Self::new), then
/// [`with_detail`](Self::with_detail).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommandResult {
    /// SUCCEEDED, FAILED or CANCELLED.
    pub outcome: Outcome,
    /// Human-readable outcome (no secrets).
    pub message: String,
    /// Structured details (no secrets).
    pub detail: BTreeMap<String, String>,
}

impl CommandResult {
    /// A SUCCEEDED result.
    pub fn succeeded(message: impl Into<String>) -> Self {
        Self::new(Outcome::Succeeded, message)
    }

    /// A FAILED result.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(Outcome::Failed, message)
    }

    /// A CANCELLED result.
    pub fn cancelled(message: impl Into<String>) -> Self {
        Self::new(Outcome::Cancelled, message)
    }

    /// A result with `outcome`.
    pub fn new(outcome: Outcome, message: impl Into<String>) -> Self {
        Self {
            outcome,
            message: message.into(),
            detail: BTreeMap::new(),
        }
    }

    /// Adds a detail entry.
    pub fn with_detail(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.detail.insert(key.into(), value.into());
        self
    }
}

/// Where a context sends RUNNING reports (the Edge driver).
pub(crate) trait Reporter: Send + Sync {
    /// The driver's shared state, for [`CommandContext::edge`]; `None` once it is gone.
    fn edge(&self) -> Option<Arc<dyn std::any::Any + Send + Sync>>;

    fn running(
        &self,
        command_id: &str,
        message: String,
        detail: BTreeMap<String, String>,
    ) -> Result<(), ReportError>;
}

/// What a handler gets: the command, and a way to report progress.
#[derive(Clone)]
pub struct CommandContext {
    pub(crate) command_id: String,
    pub(crate) operation: String,
    pub(crate) target: Target,
    pub(crate) metadata: BTreeMap<String, String>,
    pub(crate) deadline: std::time::Instant,
    pub(crate) reporter: Arc<dyn Reporter>,
    /// Set when a `command.cancel` asks this command to stop, or the Edge shuts down.
    pub(crate) cancel: super::flag::Flag,
}

impl std::fmt::Debug for CommandContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandContext")
            .field("command_id", &self.command_id)
            .field("operation", &self.operation)
            .field("target", &self.target)
            .field("metadata", &self.metadata)
            .field("deadline", &self.deadline)
            .field("cancelled", &self.cancel.is_set())
            .finish()
    }
}

impl CommandContext {
    /// The command's id (its idempotency key).
    pub fn command_id(&self) -> &str {
        &self.command_id
    }

    /// The operation.
    pub fn operation(&self) -> &str {
        &self.operation
    }

    /// The resolved target.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The request's metadata.
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    /// When the Edge reports TIMED_OUT if the handler has not finished.
    pub fn deadline(&self) -> std::time::Instant {
        self.deadline
    }

    /// Whether the deadline passed (the command is TIMED_OUT; the handler's result
    /// will be ignored).
    pub fn is_timed_out(&self) -> bool {
        std::time::Instant::now() >= self.deadline
    }

    /// Whether the command was asked to stop: a `command.cancel` named it (PROTOCOL.md
    /// §4.4), or the Edge is shutting down. A handler that sees it stops and returns
    /// [`CommandResult::cancelled`] saying what it did; one that has not returned
    /// within the Edge's cancel grace ([`EdgeClient::with_cancel_grace`](super::EdgeClient::with_cancel_grace))
    /// finds its command ended CANCELLED by the Edge and its result ignored.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_set()
    }

    /// Resolves once the command is asked to stop ([`is_cancelled`](Self::is_cancelled)):
    /// race it against the handler's work, e.g. with `futures_lite::future::or`.
    pub fn cancelled(&self) -> impl Future<Output = ()> + Send + 'static {
        self.cancel.wait()
    }

    /// Reports progress (a RUNNING phase). After the deadline this returns
    /// [`ReportError::TimedOut`]: the handler should stop.
    pub fn running(
        &self,
        message: impl Into<String>,
        detail: BTreeMap<String, String>,
    ) -> Result<(), ReportError> {
        self.reporter
            .running(&self.command_id, message.into(), detail)
    }
}

/// A boxed handler future.
pub type HandlerFuture = Pin<Box<dyn Future<Output = CommandResult> + Send + 'static>>;

/// A registered handler.
pub(crate) type Handler = Arc<dyn Fn(CommandContext) -> HandlerFuture + Send + Sync>;

/// Boxes an async function as a [`Handler`].
pub(crate) fn boxed<F, Fut>(f: F) -> Handler
where
    F: Fn(CommandContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = CommandResult> + Send + 'static,
{
    Arc::new(move |ctx| Box::pin(f(ctx)) as HandlerFuture)
}
