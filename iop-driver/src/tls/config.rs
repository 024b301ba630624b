//! TLS configurations built from PEM: [`ServerTls`] (Control Plane) and [`ClientTls`]
//! (Edge).

use std::path::Path;
use std::sync::Arc;

use futures_rustls::pki_types::pem::PemObject;
use futures_rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use futures_rustls::rustls::{self, RootCertStore};
use zeroize::Zeroizing;

use super::error::TlsConfigError;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads a file; the bytes are zeroed when dropped (they may be a private key).
fn read(path: &Path) -> Result<Zeroizing<Vec<u8>>, TlsConfigError> {
    std::fs::read(path)
        .map(Zeroizing::new)
        .map_err(|source| TlsConfigError::Read {
            path: path.to_owned(),
            source,
        })
}

fn certs(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, TlsConfigError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsConfigError::Pem {
            what: what.to_owned(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsConfigError::NoCertificate {
            what: what.to_owned(),
        });
    }
    Ok(certs)
}

fn key(pem: &[u8], what: &str) -> Result<PrivateKeyDer<'static>, TlsConfigError> {
    // The pki-types error text names the PEM section problem, never the key bytes.
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| TlsConfigError::BadKey {
        what: what.to_owned(),
        reason: e.to_string(),
    })
}

fn roots(pem: &[u8], what: &str) -> Result<RootCertStore, TlsConfigError> {
    let mut store = RootCertStore::empty();
    for cert in certs(pem, what)? {
        store.add(cert).map_err(|e| TlsConfigError::Pem {
            what: what.to_owned(),
            reason: format!("unusable CA certificate: {e}"),
        })?;
    }
    Ok(store)
}

fn name(path: &Path) -> String {
    path.display().to_string()
}

/// The Control Plane's TLS: its certificate chain and private key, and, for mutual
/// TLS, the CA every Edge's client certificate must chain to (a client without a valid
/// certificate then fails the handshake). `Debug` shows no key material.
#[derive(Clone)]
pub struct ServerTls {
    pub(crate) config: Arc<rustls::ServerConfig>,
    mutual: bool,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("client_certificates_required", &self.mutual)
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// From PEM bytes: `cert_chain` (the server certificate first), its private `key`,
    /// and optionally `client_ca` (one or more CA certificates) for mutual TLS.
    pub fn from_pem(
        cert_chain: &[u8],
        key_pem: &[u8],
        client_ca: Option<&[u8]>,
    ) -> Result<Self, TlsConfigError> {
        Self::build(
            certs(cert_chain, "server certificate")?,
            key(key_pem, "server key")?,
            client_ca.map(|pem| roots(pem, "client CA")).transpose()?,
        )
    }

    /// From PEM files (see [`from_pem`](Self::from_pem)); errors name the file.
    pub fn from_pem_files(
        cert_chain: &Path,
        key_file: &Path,
        client_ca: Option<&Path>,
    ) -> Result<Self, TlsConfigError> {
        let chain = certs(&read(cert_chain)?, &name(cert_chain))?;
        let key = key(&read(key_file)?, &name(key_file))?;
        let ca = match client_ca {
            Some(path) => Some(roots(&read(path)?, &name(path))?),
            None => None,
        };
        Self::build(chain, key, ca)
    }

    fn build(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        client_ca: Option<RootCertStore>,
    ) -> Result<Self, TlsConfigError> {
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?;
        let mutual = client_ca.is_some();
        let builder = match client_ca {
            Some(roots) => {
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider(),
                )
                .build()
                .map_err(|e| TlsConfigError::ClientVerifier(e.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let config = builder.with_single_cert(chain, key)?;
        Ok(Self {
            config: Arc::new(config),
            mutual,
        })
    }

    /// Whether Edges must present a client certificate (a client CA was given).
    pub fn requires_client_certificates(&self) -> bool {
        self.mutual
    }

    /// The server side of a TLS handshake on `stream` with this certificate, for a
    /// server of its own beside the Control Plane's (an admin API over HTTPS, say);
    /// the encrypted stream once it completes. Unbounded in time: the caller bounds it.
    pub async fn accept<S>(
        &self,
        stream: S,
    ) -> Result<
        impl futures_io::AsyncRead + futures_io::AsyncWrite + Unpin + Send + use<S>,
        super::HandshakeError,
    >
    where
        S: futures_io::AsyncRead + futures_io::AsyncWrite + Unpin + Send,
    {
        futures_rustls::TlsAcceptor::from(self.config.clone())
            .accept(stream)
            .await
            .map_err(|e| super::HandshakeError::from_io(&e))
    }
}

/// An Edge's TLS: the CA it trusts for the Control Plane's certificate, the server
/// name that certificate must be valid for, and optionally the Edge's own client
/// certificate and key (mutual TLS). `Debug` shows no key material.
#[derive(Clone)]
pub struct ClientTls {
    pub(crate) config: Arc<rustls::ClientConfig>,
    pub(crate) server_name: ServerName<'static>,
    client_certificate: bool,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("server_name", &self.server_name)
            .field("client_certificate", &self.client_certificate)
            .finish_non_exhaustive()
    }
}

impl ClientTls {
    /// From PEM bytes: `ca` (one or more CA certificates), the `server_name` the
    /// Control Plane's certificate must be valid for (a DNS name or an IP address), and
    /// optionally a client `(certificate chain, private key)`.
    pub fn from_pem(
        ca: &[u8],
        server_name: &str,
        client: Option<(&[u8], &[u8])>,
    ) -> Result<Self, TlsConfigError> {
        let client = match client {
            Some((chain, key_pem)) => Some((
                certs(chain, "client certificate")?,
                key(key_pem, "client key")?,
            )),
            None => None,
        };
        Self::build(roots(ca, "CA")?, server_name, client)
    }

    /// From PEM files (see [`from_pem`](Self::from_pem)); errors name the file.
    pub fn from_pem_files(
        ca: &Path,
        server_name: &str,
        client: Option<(&Path, &Path)>,
    ) -> Result<Self, TlsConfigError> {
        let roots = roots(&read(ca)?, &name(ca))?;
        let client = match client {
            Some((chain, key_file)) => Some((
                certs(&read(chain)?, &name(chain))?,
                key(&read(key_file)?, &name(key_file))?,
            )),
            None => None,
        };
        Self::build(roots, server_name, client)
    }

    fn build(
        roots: RootCertStore,
        server_name: &str,
        client: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    ) -> Result<Self, TlsConfigError> {
        let server_name = ServerName::try_from(server_name.to_owned())
            .map_err(|_| TlsConfigError::ServerName(server_name.to_owned()))?;
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots);
        let client_certificate = client.is_some();
        let config = match client {
            Some((chain, key)) => builder.with_client_auth_cert(chain, key)?,
            None => builder.with_no_client_auth(),
        };
        Ok(Self {
            config: Arc::new(config),
            server_name,
            client_certificate,
        })
    }

    /// The client side of a TLS handshake on `stream`, verifying the server's
    /// certificate as an Edge does, for a connection of its own (to a Control Plane's
    /// admin API over HTTPS, say); the encrypted stream once it completes. Unbounded in
    /// time: the caller bounds it.
    pub async fn connect<S>(
        &self,
        stream: S,
    ) -> Result<
        impl futures_io::AsyncRead + futures_io::AsyncWrite + Unpin + Send + use<S>,
        super::HandshakeError,
    >
    where
        S: futures_io::AsyncRead + futures_io::AsyncWrite + Unpin + Send,
    {
        futures_rustls::TlsConnector::from(self.config.clone())
            .connect(self.server_name.clone(), stream)
            .await
            .map_err(|e| super::HandshakeError::from_io(&e))
    }
}
