//! What the Edge is configured with: nodes, their providers, and the private connection
//! details that are never reported.

use std::collections::BTreeMap;
use std::fmt;

use crate::ids::{IdError, validate_id, validate_label};

/// Most providers one node may have (PROTOCOL.md §7).
pub const MAX_PROVIDERS_PER_NODE: usize = crate::limits::MAX_PROVIDERS_PER_NODE;
/// Most labels one node may have (PROTOCOL.md §7, entries per map).
pub const MAX_LABELS_PER_NODE: usize = crate::limits::MAX_MAP_ENTRIES;
/// Most models one provider (or one node's config summary) may list (PROTOCOL.md §7).
pub const MAX_MODELS: usize = crate::limits::MAX_MODELS;
/// Longest model name or config revision, in bytes: the registry holds them to the
/// id length, below the wire's 4 KiB for text.
pub const MAX_NAME_LEN: usize = crate::limits::MAX_ID_LEN;

/// The kind of resource a provider is (wire `ProviderCategory`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProviderCategory {
    /// A command-line tool run by the node.
    Cli,
    /// A remote API the node calls.
    Api,
    /// Inference running on the node itself.
    LocalInference,
}

impl ProviderCategory {
    /// The wire enum value.
    pub fn to_wire(self) -> crate::proto::ProviderCategory {
        match self {
            Self::Cli => crate::proto::ProviderCategory::Cli,
            Self::Api => crate::proto::ProviderCategory::Api,
            Self::LocalInference => crate::proto::ProviderCategory::LocalInference,
        }
    }
}

/// One configured provider of a node. Built with [`ProviderConfig::new`] and
/// [`with_model`](Self::with_model) (`#[non_exhaustive]`: a later field is not a
/// breaking change).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProviderConfig {
    /// The provider's id, unique within its node (id grammar, PROTOCOL.md §3).
    pub provider_id: String,
    /// What kind of resource it is.
    pub category: ProviderCategory,
    /// Models it serves, reported as given.
    pub models: Vec<String>,
    /// Upper bound on all leases (normal and long-context) at once.
    pub capacity: u32,
    /// Upper bound on long-context leases at once; at most `capacity`.
    pub long_context_capacity: u32,
}

impl ProviderConfig {
    /// A provider with no models and the given capacities.
    pub fn new(
        provider_id: impl Into<String>,
        category: ProviderCategory,
        capacity: u32,
        long_context_capacity: u32,
    ) -> Self {
        Self {
            provider_id: provider_id.into(),
            category,
            models: Vec::new(),
            capacity,
            long_context_capacity,
        }
    }

    /// Adds a model name.
    #[must_use]
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.models.push(model.into());
        self
    }
}

/// How the Edge reaches a node: address, token and transport details.
///
/// The Edge needs these; nobody else may ever see them. Nothing in the registry copies
/// them into a snapshot or event, and `Debug` prints only `<redacted>`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct NodeEndpoint {
    address: String,
    /// Zeroed on drop.
    token: zeroize::Zeroizing<String>,
    transport: BTreeMap<String, String>,
}

impl NodeEndpoint {
    /// An endpoint with the given address and token and no transport details.
    pub fn new(address: impl Into<String>, token: impl Into<String>) -> Self {
        Self {
            address: address.into(),
            token: zeroize::Zeroizing::new(token.into()),
            transport: BTreeMap::new(),
        }
    }

    /// Adds a transport detail (e.g. TLS server name, proxy).
    #[must_use]
    pub fn with_transport(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.transport.insert(key.into(), value.into());
        self
    }

    /// The node's address.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The node's token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Transport details.
    pub fn transport(&self) -> &BTreeMap<String, String> {
        &self.transport
    }
}

impl fmt::Debug for NodeEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NodeEndpoint(<redacted>)")
    }
}

/// One configured node.
///
/// Providers are kept and reported sorted by `provider_id`; the config summary's
/// `provider_ids` list is derived from them. Built with [`NodeConfig::new`] and the
/// `with_*` methods (`#[non_exhaustive]`: a later field is not a breaking change).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeConfig {
    /// The node's id (id grammar, PROTOCOL.md §3).
    pub node_id: String,
    /// Labels, matched by `label:` selectors (label grammar, at most 64).
    pub labels: BTreeMap<String, String>,
    /// Revision of the config pushed to the node (e.g. a digest), reported as given.
    pub revision: String,
    /// Models named in the node's config summary.
    pub models: Vec<String>,
    /// Providers (at most 256, ids unique).
    pub providers: Vec<ProviderConfig>,
    /// Private connection details; never reported.
    pub endpoint: NodeEndpoint,
}

impl NodeConfig {
    /// A node with no labels, providers or models and an empty endpoint.
    pub fn new(node_id: impl Into<String>) -> Self {
        Self {
            node_id: node_id.into(),
            labels: BTreeMap::new(),
            revision: String::new(),
            models: Vec::new(),
            providers: Vec::new(),
            endpoint: NodeEndpoint::default(),
        }
    }

    /// Sets a label.
    #[must_use]
    pub fn with_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// Sets the config revision.
    #[must_use]
    pub fn with_revision(mut self, revision: impl Into<String>) -> Self {
        self.revision = revision.into();
        self
    }

    /// Adds a model to the config summary.
    #[must_use]
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.models.push(model.into());
        self
    }

    /// Adds a provider.
    #[must_use]
    pub fn with_provider(mut self, provider: ProviderConfig) -> Self {
        self.providers.push(provider);
        self
    }

    /// Sets the private endpoint.
    #[must_use]
    pub fn with_endpoint(mut self, endpoint: NodeEndpoint) -> Self {
        self.endpoint = endpoint;
        self
    }

    /// Checks every rule and sorts providers by id.
    pub(crate) fn validated(mut self) -> Result<Self, ConfigError> {
        validate_id("node_id", &self.node_id).map_err(ConfigError::InvalidNodeId)?;
        if self.labels.len() > MAX_LABELS_PER_NODE {
            return Err(ConfigError::TooManyLabels {
                count: self.labels.len(),
                max: MAX_LABELS_PER_NODE,
            });
        }
        for (key, value) in &self.labels {
            validate_label("label key", key).map_err(ConfigError::InvalidLabel)?;
            validate_label("label value", value).map_err(ConfigError::InvalidLabel)?;
        }
        check_name("revision", &self.revision, true)?;
        check_models(&self.models)?;
        if self.providers.len() > MAX_PROVIDERS_PER_NODE {
            return Err(ConfigError::TooManyProviders {
                count: self.providers.len(),
                max: MAX_PROVIDERS_PER_NODE,
            });
        }
        for p in &self.providers {
            validate_id("provider_id", &p.provider_id).map_err(ConfigError::InvalidProviderId)?;
            check_models(&p.models)?;
            if p.long_context_capacity > p.capacity {
                return Err(ConfigError::LongContextCapacityAboveCapacity {
                    provider_id: p.provider_id.clone(),
                    long_context_capacity: p.long_context_capacity,
                    capacity: p.capacity,
                });
            }
        }
        self.providers
            .sort_by(|a, b| a.provider_id.cmp(&b.provider_id));
        for pair in self.providers.windows(2) {
            if let [a, b] = pair
                && a.provider_id == b.provider_id
            {
                return Err(ConfigError::DuplicateProvider {
                    provider_id: a.provider_id.clone(),
                });
            }
        }
        Ok(self)
    }
}

fn check_models(models: &[String]) -> Result<(), ConfigError> {
    if models.len() > MAX_MODELS {
        return Err(ConfigError::TooManyModels {
            count: models.len(),
            max: MAX_MODELS,
        });
    }
    models
        .iter()
        .try_for_each(|m| check_name("model", m, false))
}

fn check_name(what: &'static str, s: &str, may_be_empty: bool) -> Result<(), ConfigError> {
    if (s.is_empty() && !may_be_empty) || s.len() > MAX_NAME_LEN || s.chars().any(char::is_control)
    {
        return Err(ConfigError::InvalidName { what, len: s.len() });
    }
    Ok(())
}

/// Why a node configuration was refused. The registry is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The node id breaks the id grammar.
    #[error("invalid node id: {0}")]
    InvalidNodeId(IdError),
    /// A provider id breaks the id grammar.
    #[error("invalid provider id: {0}")]
    InvalidProviderId(IdError),
    /// A label key or value breaks the label grammar.
    #[error("invalid label: {0}")]
    InvalidLabel(IdError),
    /// More labels than allowed.
    #[error("{count} labels, more than the {max} allowed")]
    TooManyLabels {
        /// How many were given.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// More providers than allowed.
    #[error("{count} providers, more than the {max} allowed")]
    TooManyProviders {
        /// How many were given.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// More models than allowed in one list.
    #[error("{count} models, more than the {max} allowed")]
    TooManyModels {
        /// How many were given.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A model name or revision is empty (models only), longer than 128 bytes, or holds
    /// a control character.
    #[error("invalid {what} ({len} bytes): must be 1..=128 bytes without control characters")]
    InvalidName {
        /// "model" or "revision".
        what: &'static str,
        /// Its length in bytes.
        len: usize,
    },
    /// Two providers share an id.
    #[error("provider {provider_id} is configured twice")]
    DuplicateProvider {
        /// The repeated id.
        provider_id: String,
    },
    /// `long_context_capacity` exceeds `capacity`.
    #[error(
        "provider {provider_id}: long_context_capacity {long_context_capacity} exceeds capacity {capacity}"
    )]
    LongContextCapacityAboveCapacity {
        /// The provider.
        provider_id: String,
        /// Its long-context capacity.
        long_context_capacity: u32,
        /// Its capacity.
        capacity: u32,
    },
    /// An update would remove a provider that holds leases, or lower a capacity below
    /// the leases it holds. Drain the node and wait for the leases to be released.
    #[error(
        "provider {provider_id} holds {in_flight} leases ({long_context_in_flight} long-context); the new config cannot remove it or lower its capacity below that"
    )]
    ProviderBusy {
        /// The provider.
        provider_id: String,
        /// Its leases.
        in_flight: u32,
        /// Its long-context leases.
        long_context_in_flight: u32,
    },
}
