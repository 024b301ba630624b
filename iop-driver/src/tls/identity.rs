//! A verified client certificate as an [`iop_core::cp::PeerIdentity`].

use futures_rustls::pki_types::{CertificateDer, ServerName};
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
    fn names_edge(&self, edge_id: &str) -> bool {
        let Ok(name) = ServerName::try_from(edge_id) else {
            return false;
        };
        // An IP-address "edge id" is not a DNS name: refuse rather than match IP SANs.
        if !matches!(name, ServerName::DnsName(_)) {
            return false;
        }
        let Ok(cert) = webpki::EndEntityCert::try_from(&self.0) else {
            return false;
        };
        cert.verify_is_valid_for_subject_name(&name).is_ok()
    }
}
