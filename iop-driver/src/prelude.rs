//! The names a program embedding a Control Plane or an Edge uses, whatever its
//! runtime. `iop_tokio::prelude` and `iop_smol::prelude` add their runtime's server,
//! client and handle types to these; import one of those:
//!
//! ```
//! use iop_driver::prelude::*;
//!
//! let config = EdgeConfig::new("edge-1", process_seed());
//! let spec = CommandSpec::new("model.warmup").with_target("node:gpu-1");
//! let node = NodeConfig::new("gpu-1")
//!     .with_provider(ProviderConfig::new("vllm", ProviderCategory::LocalInference, 4, 1));
//! # let _ = (config, spec, node, ServerConfig::new(EnrolmentPolicy::AcceptAny));
//! ```
//!
//! `ProviderCategory` here is the registry's (what a provider is configured as); the
//! wire enum of the same name is `iop_core::proto::ProviderCategory`.

pub use crate::tls::{ClientTls, ServerTls};
pub use crate::{
    CommandContext, CommandFailure, CommandRecord, CommandResult, CommandUpdate, ConnectedError,
    DialError, EdgeSession, NoAnswer, Notice, SendCommandError, ServerConfig, StatusRequestError,
    SubscribeOptions, Subscription, Terminal, WaitForEdgeError, process_seed,
};
pub use futures_lite::StreamExt;
pub use iop_core::NodeRegistry;
pub use iop_core::cp::{
    AllowList, CommandError, CommandOutcome, CommandSpec, CpConfig, CpEvent, CpEventKind,
    Credential, DuplicatePolicy, EdgeAbsent, EdgeView, Ending, EnrolmentPolicy, Fault,
    Reachability, StatusError,
};
pub use iop_core::edge::{EdgeConfig, EdgeEvent, Outcome, Target, TargetLevel};
pub use iop_core::proto::{
    CommandPhase, CommandRejectReason, EdgeCommandEvent, EdgeNodeEvent, EdgeNodeSnapshot,
    EdgeStatusResponse, HelloRejectReason, NodeEventKind, NodeState, ProviderHealth,
    ProviderSnapshot, ProviderStatus, WireEnum,
};
pub use iop_core::registry::{
    NodeConfig, NodeEndpoint, ProviderCategory, ProviderConfig, ReadyOutcome,
};
