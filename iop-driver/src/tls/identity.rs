//! A verified client certificate as an [`iop_core::cp::PeerIdentity`].

use futures_rustls::pki_types::CertificateDer;
use iop_core::cp::PeerIdentity;

/// The end-entity certificate a client presented and rustls verified against the
/// client CA. It names an Edge when it is valid for the `edge_id` as a DNS name (see
/// the [module docs](super) for the rule). `Debug` shows only its size.
pub struct CertIdentity(CertificateDer<'static>);

impl CertIdentity {
    /// Wraps a verified end-entity certificate.
    pub fn new(certificate: CertificateDer<'static>) -> Self {
        Self(certificate)
    }
}

impl std::fmt::Debug for CertIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CertIdentity({} bytes)", self.0.len())
    }
}

impl PeerIdentity for CertIdentity {
    /// Byte-for-byte equality with a SAN DNS entry (see the [module docs](super)):
    /// edge ids are case-sensitive and never wildcards, unlike the host names TLS
    /// matching was made for.
    fn names_edge(&self, edge_id: &str) -> bool {
        let Ok(cert) = webpki::EndEntityCert::try_from(&self.0) else {
            return false;
        };
        cert.valid_dns_names()
            .any(|name| name.as_bytes() == edge_id.as_bytes())
    }
}
