//! The transport's word on who the peer is (mutual TLS), checked against the hello.
//!
//! A runtime that authenticates the Edge below the protocol (a verified client
//! certificate) attaches a [`PeerIdentity`] to the connection with
//! [`ControlPlane::handle_connect_with_identity`](super::ControlPlane::handle_connect_with_identity).
//! With [`CpConfig::require_peer_identity`](super::CpConfig::require_peer_identity) on,
//! the hello is then refused `BAD_CREDENTIAL` (after the enrolment check of PROTOCOL.md
//! §4.1.2 step 4, whose order it keeps) when the connection has no identity or when the
//! identity does not name the hello's `edge_id`. The identity is dropped once the hello
//! is answered.

use std::fmt;

/// A verified identity of the peer of one connection.
///
/// `iop-driver` implements it for a verified client certificate: the certificate names
/// an Edge when it is valid for the `edge_id` as a DNS name (a `subjectAltName` DNS
/// entry, matched as a TLS client matches a server name; the CN is not used).
pub trait PeerIdentity: fmt::Debug + Send + Sync {
    /// Whether this identity names the Edge `edge_id`.
    fn names_edge(&self, edge_id: &str) -> bool;
}

/// A fixed list of names, matched exactly (useful for tests and non-TLS transports
/// that know the peer by other means).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamedPeer {
    /// The names the peer was authenticated as.
    pub names: Vec<String>,
}

impl NamedPeer {
    /// A peer authenticated as each of `names`.
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(names: I) -> Self {
        Self {
            names: names.into_iter().map(Into::into).collect(),
        }
    }
}

impl PeerIdentity for NamedPeer {
    fn names_edge(&self, edge_id: &str) -> bool {
        self.names.iter().any(|n| n == edge_id)
    }
}
