//! TLS for both ends (PROTOCOL.md §2: rustls wraps the TCP connection, framing unchanged),
//! written once over `futures-io` so every runtime adapter gets it.
//!
//! * [`ServerTls`]: the Control Plane's certificate chain and key, and optionally a CA
//!   that Edges' client certificates must chain to (mutual TLS).
//! * [`ClientTls`]: the CA an Edge verifies the Control Plane against, the name it
//!   expects in the Control Plane's certificate, and optionally the Edge's own client
//!   certificate and key.
//!
//! # Mutual TLS identity rule
//!
//! A verified client certificate *names* an Edge when one of its `subjectAltName` DNS
//! entries equals the Edge's `edge_id` byte for byte. Nothing looser: no case folding
//! (`EDGE-1` and `edge-1` are two Edges), no trailing dot, no wildcard (`*.fleet` names
//! no Edge); the subject CN is never used. An edge id that is not a valid DNS name (for
//! example one with `..` or a label starting with `-`) can never be named, so such
//! Edges cannot use the identity check. With [`CpConfig::require_peer_identity`] on, a hello whose `edge_id`
//! the certificate does not name is refused `BAD_CREDENTIAL` with the message "client
//! certificate identity does not match the edge id" (see [`iop_core::cp::PeerIdentity`]).
//!
//! [`CpConfig::require_peer_identity`]: iop_core::cp::CpConfig::require_peer_identity
//!
//! Private keys are read into memory that is zeroed on drop, and no type here prints
//! key material in its `Debug`.

mod config;
mod error;
mod identity;
mod stream;

pub use config::{ClientTls, ServerTls};
pub use error::{HandshakeError, HandshakeFailure, TlsConfigError};
pub use identity::CertIdentity;
pub(crate) use stream::MaybeTls;
