//! The Control Plane's enrolment file (`iop-control-plane --enroll FILE`): which Edge
//! ids may enrol, each with the SHA-256 hash of its credential — never the credential
//! in clear.
//!
//! ```toml
//! [[edges]]
//! id = "edge-1"
//! credential_sha256 = "4c1d...64 hex digits"
//! ```
//!
//! Compute a hash with `iop-control-plane hash-credential < credential-file` (one
//! trailing newline is ignored, exactly as `iop-edge --credential-file` does), or
//! `printf '%s' 'the-secret' | sha256sum`.

use std::collections::BTreeSet;
use std::path::Path;

use iop_core::cp::{AllowList, CredentialHash};
use iop_core::ids::validate_id;
use serde::Deserialize;
use toml::Spanned;

use super::file_error::{FileError, line_of, read_text};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    edges: Vec<RawEdge>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEdge {
    id: Spanned<String>,
    credential_sha256: Spanned<String>,
}

/// A checked enrolment file.
#[derive(Debug, Clone, Default)]
pub struct EnrolFile {
    /// The allow list it describes (hashes only).
    pub allow_list: AllowList,
    /// The enrolled Edge ids, sorted.
    pub edge_ids: Vec<String>,
}

impl EnrolFile {
    /// Reads and checks the file at `path`.
    pub fn load(path: &Path) -> Result<Self, FileError> {
        let text = read_text(path)?;
        Self::parse(path, &text)
    }

    /// Checks `text`, reporting errors against `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Self, FileError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| FileError::toml(path, text, &e))?;
        let mut allow_list = AllowList::new();
        let mut ids = BTreeSet::new();
        for (index, edge) in raw.edges.into_iter().enumerate() {
            let id = edge.id.get_ref();
            let id_line = line_of(text, edge.id.span().start);
            validate_id("edge id", id).map_err(|e| {
                FileError::new(path, Some(id_line), format!("edges[{index}].id: {e}"))
            })?;
            if !ids.insert(id.clone()) {
                return Err(FileError::new(
                    path,
                    Some(id_line),
                    format!("edges[{index}].id: edge {id:?} is listed twice"),
                ));
            }
            let hash_line = line_of(text, edge.credential_sha256.span().start);
            let hash = parse_hash(edge.credential_sha256.get_ref()).map_err(|why| {
                FileError::new(
                    path,
                    Some(hash_line),
                    format!("edges[{index}].credential_sha256 (edge {id:?}): {why}"),
                )
            })?;
            allow_list.insert_hash(id.clone(), hash);
        }
        Ok(Self {
            allow_list,
            edge_ids: ids.into_iter().collect(),
        })
    }
}

fn parse_hash(hex_text: &str) -> Result<CredentialHash, String> {
    CredentialHash::from_hex(hex_text).ok_or_else(|| {
        format!(
            "expected the SHA-256 of the credential as 64 hex digits, got {} characters \
             (compute it with `iop-control-plane hash-credential`)",
            hex_text.trim().len()
        )
    })
}

/// The credential bytes of a credential file's contents: everything but one trailing
/// newline (`\n` or `\r\n`), so `echo secret > file` works.
pub fn credential_bytes(raw: &[u8]) -> &[u8] {
    raw.strip_suffix(b"\r\n")
        .or_else(|| raw.strip_suffix(b"\n"))
        .unwrap_or(raw)
}

/// The lowercase hex SHA-256 of a credential, as the enrolment file stores it.
pub fn credential_hash_hex(credential: &[u8]) -> String {
    CredentialHash::of(credential).to_hex()
}
