//! The Edge's configuration file (`iop-edge --config FILE`): its nodes and providers.
//!
//! ```toml
//! [[nodes]]
//! id = "gpu-1"                        # id grammar: [A-Za-z0-9._-]{1,128}
//! revision = "2026-11-29.1"           # revision of the config pushed to the node
//! models = ["llama-3-8b"]
//! labels = { zone = "a" }
//! address = "10.0.0.5:7000"           # private: never leaves the Edge process
//! token = "node-token-0f3a9c2e71b4"    # private: never leaves the Edge process (16+ bytes;
//!                                     # with one, the file must be readable by its owner only)
//!
//! [[nodes.providers]]
//! id = "llama"
//! category = "local_inference"        # cli | api | local_inference
//! models = ["llama-3-8b"]
//! capacity = 4
//! long_context_capacity = 1
//! ```
//!
//! Unknown keys are errors (a typo must not be silently ignored). Every node is
//! checked with the registry's own rules before anything is applied, and an error
//! names the file, the line and the node.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use iop_core::NodeRegistry;
use iop_core::registry::{NodeConfig, NodeEndpoint, ProviderCategory, ProviderConfig};
use serde::Deserialize;
use toml::Spanned;

use super::file_error::{FileError, line_of, read_text};

/// The shortest node token accepted: a guessable one is no secret.
pub const MIN_TOKEN_LEN: usize = 16;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    nodes: Vec<RawNode>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    id: Spanned<String>,
    #[serde(default)]
    revision: String,
    #[serde(default)]
    models: Vec<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    providers: Vec<RawProvider>,
    #[serde(default)]
    address: String,
    #[serde(default)]
    token: String,
    #[serde(default)]
    transport: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProvider {
    id: String,
    category: RawCategory,
    #[serde(default)]
    models: Vec<String>,
    capacity: u32,
    #[serde(default)]
    long_context_capacity: u32,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum RawCategory {
    Cli,
    Api,
    LocalInference,
}

impl From<RawCategory> for ProviderCategory {
    fn from(c: RawCategory) -> Self {
        match c {
            RawCategory::Cli => ProviderCategory::Cli,
            RawCategory::Api => ProviderCategory::Api,
            RawCategory::LocalInference => ProviderCategory::LocalInference,
        }
    }
}

/// The nodes of an Edge config file, checked and ready for
/// [`NodeRegistry::configure`], in file order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EdgeFile {
    /// The configured nodes (private endpoint fields included, redacted in `Debug`).
    pub nodes: Vec<NodeConfig>,
}

impl EdgeFile {
    /// Reads and checks the file at `path`. A file that holds a node token is a
    /// secrets file: refused when anyone but its owner may read it.
    pub fn load(path: &Path) -> Result<Self, FileError> {
        // The text holds node tokens: zeroed once parsed.
        let text = zeroize::Zeroizing::new(read_text(path)?);
        let file = Self::parse(path, &text)?;
        if file.nodes.iter().any(|n| !n.endpoint.token().is_empty()) {
            super::private_file::check_private(path)?;
        }
        Ok(file)
    }

    /// Checks `text`, reporting errors against `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Self, FileError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| FileError::toml(path, text, &e))?;
        let mut seen = BTreeSet::new();
        let mut check = NodeRegistry::new();
        let mut nodes = Vec::with_capacity(raw.nodes.len());
        for (index, node) in raw.nodes.into_iter().enumerate() {
            let line = line_of(text, node.id.span().start);
            let id = node.id.get_ref().clone();
            let at = |msg: String| {
                FileError::new(
                    path,
                    Some(line),
                    format!("nodes[{index}] (id {id:?}): {msg}"),
                )
            };
            if !seen.insert(id.clone()) {
                return Err(at("node id is configured twice".into()));
            }
            if !node.token.is_empty() && node.token.len() < MIN_TOKEN_LEN {
                return Err(at(format!(
                    "a node token must be at least {MIN_TOKEN_LEN} bytes (e.g. `openssl rand -hex 24`)"
                )));
            }
            let mut config = NodeConfig::new(id.clone())
                .with_revision(node.revision)
                .with_endpoint(
                    node.transport
                        .into_iter()
                        .fold(NodeEndpoint::new(node.address, node.token), |e, (k, v)| {
                            e.with_transport(k, v)
                        }),
                );
            config.labels = node.labels;
            config.models = node.models;
            for p in node.providers {
                let mut provider = ProviderConfig::new(
                    p.id,
                    p.category.into(),
                    p.capacity,
                    p.long_context_capacity,
                );
                provider.models = p.models;
                config = config.with_provider(provider);
            }
            // The registry's own rules, on a scratch registry: nothing half-applied.
            let _outcome = check
                .configure(config.clone(), 0)
                .map_err(|e| at(e.to_string()))?;
            nodes.push(config);
        }
        Ok(Self { nodes })
    }

    /// Node ids, in file order.
    pub fn node_ids(&self) -> impl Iterator<Item = &str> {
        self.nodes.iter().map(|n| n.node_id.as_str())
    }
}
