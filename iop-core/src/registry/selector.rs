//! Target selectors (PROTOCOL.md §6): parsing, resolving against the registry, and the level
//! check an operation makes.
//!
//! Grammar (ASCII, exact — no surrounding whitespace):
//! empty (the Edge itself) | `*` (all configured nodes) | `node:<node_id>` |
//! `provider:<node_id>/<provider_id>` | `label:<key>=<value>`, ids and labels per PROTOCOL.md §3.

use crate::ids::{IdError, validate_id, validate_label};
use crate::proto::CommandRejectReason;

use super::NodeRegistry;

/// A parsed target selector.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Selector {
    /// Empty: the Edge itself.
    Edge,
    /// `*`: every configured node (or, for an edge-level operation, the Edge).
    All,
    /// `node:<node_id>`.
    Node(String),
    /// `provider:<node_id>/<provider_id>`.
    Provider {
        /// The node.
        node_id: String,
        /// The provider on it.
        provider_id: String,
    },
    /// `label:<key>=<value>`: every configured node carrying that label.
    Label {
        /// Label key.
        key: String,
        /// Label value.
        value: String,
    },
}

/// Why a selector string does not parse (→ `INVALID_SELECTOR`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectorError {
    /// Not empty, not `*`, and no `node:`, `provider:` or `label:` prefix.
    #[error("unknown selector form: expected empty, `*`, `node:`, `provider:` or `label:`")]
    UnknownForm,
    /// The node id breaks the id grammar.
    #[error("invalid node id in selector: {0}")]
    InvalidNodeId(IdError),
    /// The provider id breaks the id grammar.
    #[error("invalid provider id in selector: {0}")]
    InvalidProviderId(IdError),
    /// `provider:` without the `/` between node and provider.
    #[error("provider selector must be `provider:<node_id>/<provider_id>`")]
    MissingProviderSeparator,
    /// `label:` without the `=` between key and value.
    #[error("label selector must be `label:<key>=<value>`")]
    MissingLabelSeparator,
    /// The label key or value breaks the label grammar.
    #[error("invalid label in selector: {0}")]
    InvalidLabel(IdError),
}

impl Selector {
    /// Parses a selector string.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        if s.is_empty() {
            return Ok(Self::Edge);
        }
        if s == "*" {
            return Ok(Self::All);
        }
        if let Some(id) = s.strip_prefix("node:") {
            validate_id("node_id", id).map_err(SelectorError::InvalidNodeId)?;
            return Ok(Self::Node(id.to_owned()));
        }
        if let Some(rest) = s.strip_prefix("provider:") {
            let (node_id, provider_id) = rest
                .split_once('/')
                .ok_or(SelectorError::MissingProviderSeparator)?;
            validate_id("node_id", node_id).map_err(SelectorError::InvalidNodeId)?;
            validate_id("provider_id", provider_id).map_err(SelectorError::InvalidProviderId)?;
            return Ok(Self::Provider {
                node_id: node_id.to_owned(),
                provider_id: provider_id.to_owned(),
            });
        }
        if let Some(rest) = s.strip_prefix("label:") {
            let (key, value) = rest
                .split_once('=')
                .ok_or(SelectorError::MissingLabelSeparator)?;
            validate_label("label key", key).map_err(SelectorError::InvalidLabel)?;
            validate_label("label value", value).map_err(SelectorError::InvalidLabel)?;
            return Ok(Self::Label {
                key: key.to_owned(),
                value: value.to_owned(),
            });
        }
        Err(SelectorError::UnknownForm)
    }

    /// True for selectors that name nodes (`*`, `node:`, `provider:`, `label:`); false
    /// for the empty (Edge) selector.
    pub fn is_node_level(&self) -> bool {
        !matches!(self, Self::Edge)
    }
}

/// What a selector resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The Edge itself.
    Edge,
    /// These configured nodes, sorted by id (never empty).
    Nodes(Vec<String>),
    /// One configured provider of one configured node.
    Provider {
        /// The node.
        node_id: String,
        /// The provider.
        provider_id: String,
    },
}

/// Why a parsed selector does not resolve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// A node-level selector matched no configured node (or provider).
    #[error("no configured node matches the selector")]
    NoMatchingTarget,
}

impl NodeRegistry {
    /// Resolves a selector against the configured nodes, whatever their state.
    pub fn resolve(&self, selector: &Selector) -> Result<Target, ResolveError> {
        let nodes: Vec<String> = match selector {
            Selector::Edge => return Ok(Target::Edge),
            Selector::All => self.nodes.keys().cloned().collect(),
            Selector::Node(id) => self
                .nodes
                .get_key_value(id.as_str())
                .map(|(k, _)| k.clone())
                .into_iter()
                .collect(),
            Selector::Provider {
                node_id,
                provider_id,
            } => {
                let found = self
                    .nodes
                    .get(node_id.as_str())
                    .and_then(|n| n.provider_index(provider_id))
                    .is_some();
                return if found {
                    Ok(Target::Provider {
                        node_id: node_id.clone(),
                        provider_id: provider_id.clone(),
                    })
                } else {
                    Err(ResolveError::NoMatchingTarget)
                };
            }
            Selector::Label { key, value } => self
                .nodes
                .iter()
                .filter(|(_, n)| n.config.labels.get(key.as_str()) == Some(value))
                .map(|(k, _)| k.clone())
                .collect(),
        };
        if nodes.is_empty() {
            Err(ResolveError::NoMatchingTarget)
        } else {
            Ok(Target::Nodes(nodes))
        }
    }
}

/// The level of target an operation takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TargetLevel {
    /// The operation acts on the Edge itself (e.g. `edge.ping`): accepts empty or `*`.
    Edge,
    /// The operation acts on nodes: accepts `*`, `node:`, `provider:`, `label:`.
    Node,
}

/// Why a command's target was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TargetError {
    /// The selector does not parse.
    #[error(transparent)]
    Invalid(#[from] SelectorError),
    /// The selector is of the wrong level for the operation.
    #[error("selector is not valid for an operation taking {level:?}-level targets")]
    WrongLevel {
        /// The level the operation takes.
        level: TargetLevel,
    },
    /// A node-level selector matched nothing.
    #[error("no configured node matches the selector")]
    NoMatchingTarget,
}

impl TargetError {
    /// The `CommandRejectReason` to answer with.
    pub fn reject_reason(&self) -> CommandRejectReason {
        match self {
            Self::Invalid(_) | Self::WrongLevel { .. } => CommandRejectReason::InvalidSelector,
            Self::NoMatchingTarget => CommandRejectReason::NoMatchingTarget,
        }
    }
}

/// Parses `selector`, checks it against the operation's `level`, and resolves it.
///
/// An edge-level operation accepts empty and `*` (both mean the Edge); a node-level one
/// accepts any node-level selector that matches at least one configured node.
pub fn resolve_target(
    registry: &NodeRegistry,
    selector: &str,
    level: TargetLevel,
) -> Result<Target, TargetError> {
    let parsed = Selector::parse(selector)?;
    match (level, &parsed) {
        (TargetLevel::Edge, Selector::Edge | Selector::All) => Ok(Target::Edge),
        (TargetLevel::Edge, _) | (TargetLevel::Node, Selector::Edge) => {
            Err(TargetError::WrongLevel { level })
        }
        (TargetLevel::Node, _) => registry
            .resolve(&parsed)
            .map_err(|ResolveError::NoMatchingTarget| TargetError::NoMatchingTarget),
    }
}
