//! Why a TLS configuration could not be built, and why a handshake failed.

use std::path::PathBuf;

use futures_rustls::rustls::{self, AlertDescription, CertificateError};

/// Why a [`ServerTls`](super::ServerTls) or [`ClientTls`](super::ClientTls) could not
/// be built. Messages name the file and never contain key material.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsConfigError {
    /// A file could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A PEM input held no certificate.
    #[error("{what}: no PEM certificate found")]
    NoCertificate {
        /// Which input (a file name or a role such as "CA").
        what: String,
    },
    /// A PEM input held no private key, or an unreadable one.
    #[error("{what}: no usable PEM private key (PKCS#8, PKCS#1 or SEC1): {reason}")]
    BadKey {
        /// Which input.
        what: String,
        /// Why (never the key).
        reason: String,
    },
    /// A PEM input could not be parsed.
    #[error("{what}: bad PEM: {reason}")]
    Pem {
        /// Which input.
        what: String,
        /// Why.
        reason: String,
    },
    /// The server name is not a valid DNS name or IP address.
    #[error("invalid TLS server name {0:?}")]
    ServerName(String),
    /// rustls refused the configuration (e.g. the key does not match the certificate).
    #[error("TLS configuration rejected: {0}")]
    Rustls(#[from] rustls::Error),
    /// The client-certificate verifier could not be built (e.g. an unusable CA).
    #[error("client CA: {0}")]
    ClientVerifier(String),
}

/// What went wrong in a TLS handshake, as a kind a caller can match on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HandshakeFailure {
    /// The peer's certificate does not chain to the trusted CA.
    UnknownIssuer,
    /// The peer's certificate expired (or is not yet valid).
    Expired,
    /// The server's certificate is not valid for the expected server name.
    NotValidForName,
    /// The peer presented no certificate where one is required.
    NoCertificate,
    /// Another certificate problem (bad signature, wrong usage, revoked, ...).
    BadCertificate,
    /// The peer refused our certificate (it sent a certificate alert).
    RejectedByPeer,
    /// The bytes received are not TLS (for example plain TCP to a TLS port).
    NotTls,
    /// The handshake did not finish in time.
    TimedOut,
    /// The connection closed or failed during the handshake.
    Io,
    /// Anything else rustls reported.
    Other,
}

/// A failed TLS handshake: its [`HandshakeFailure`] kind and a human-readable detail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("TLS handshake failed: {}: {detail}", kind.describe())]
pub struct HandshakeError {
    /// What kind of failure.
    pub kind: HandshakeFailure,
    /// The underlying error, as text (never key material).
    pub detail: String,
}

impl HandshakeFailure {
    /// A short description.
    pub fn describe(self) -> &'static str {
        match self {
            Self::UnknownIssuer => "peer certificate is not signed by a trusted CA",
            Self::Expired => "peer certificate is expired or not yet valid",
            Self::NotValidForName => "server certificate is not valid for the expected name",
            Self::NoCertificate => "peer presented no certificate",
            Self::BadCertificate => "peer certificate is invalid",
            Self::RejectedByPeer => "peer rejected our certificate",
            Self::NotTls => "peer is not speaking TLS (plain TCP to a TLS port?)",
            Self::TimedOut => "handshake timed out",
            Self::Io => "connection failed during the handshake",
            Self::Other => "TLS error",
        }
    }
}

impl HandshakeError {
    pub(crate) fn timed_out() -> Self {
        Self {
            kind: HandshakeFailure::TimedOut,
            detail: "no handshake within the time allowed".into(),
        }
    }

    /// Classifies an error returned by a `futures-rustls` handshake.
    pub(crate) fn from_io(error: &std::io::Error) -> Self {
        let detail = error.to_string();
        let rustls_error = error
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>());
        let kind = match rustls_error {
            Some(e) => classify(e),
            None => HandshakeFailure::Io,
        };
        Self { kind, detail }
    }
}

fn classify(error: &rustls::Error) -> HandshakeFailure {
    use HandshakeFailure as F;
    match error {
        rustls::Error::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer => F::UnknownIssuer,
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. } => F::Expired,
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                F::NotValidForName
            }
            _ => F::BadCertificate,
        },
        rustls::Error::NoCertificatesPresented => F::NoCertificate,
        rustls::Error::AlertReceived(
            AlertDescription::BadCertificate
            | AlertDescription::UnknownCA
            | AlertDescription::CertificateExpired
            | AlertDescription::CertificateRevoked
            | AlertDescription::CertificateUnknown
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::CertificateRequired
            | AlertDescription::AccessDenied,
        ) => F::RejectedByPeer,
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => F::NotTls,
        _ => F::Other,
    }
}
