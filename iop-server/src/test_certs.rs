//! A throw-away certificate authority for tests and trials
//! (`iop-control-plane gen-test-certs DIR`): a CA, a Control Plane server certificate
//! and Edge client certificates whose DNS name is the `edge_id` (the mutual-TLS
//! identity rule of `iop_driver::tls`). Keys are ECDSA P-256, generated with `rcgen`.
//! Not for production: the CA key is never written out, so nothing else can be signed
//! with it later.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use zeroize::Zeroizing;

/// A certificate and its private key, both PEM. `Debug` shows no key.
pub struct CertAndKey {
    /// The certificate (PEM).
    pub cert_pem: String,
    /// The private key (PKCS#8 PEM), zeroed on drop.
    pub key_pem: Zeroizing<String>,
}

impl std::fmt::Debug for CertAndKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertAndKey")
            .field("cert_pem", &format_args!("{} bytes", self.cert_pem.len()))
            .field("key_pem", &format_args!("<redacted>"))
            .finish()
    }
}

/// A test CA that issues server and client certificates.
pub struct TestPki {
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl std::fmt::Debug for TestPki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestPki").finish_non_exhaustive()
    }
}

impl TestPki {
    /// A new CA named `name`.
    pub fn new(name: &str) -> Result<Self, rcgen::Error> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let year = this_year();
        params.not_before = rcgen::date_time_ymd(year - 1, 1, 1);
        params.not_after = rcgen::date_time_ymd(year + 2, 1, 1);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate()?)?;
        Ok(Self { ca })
    }

    /// The CA certificate (PEM), for `--tls-ca` / `--tls-client-ca`.
    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    fn issue(
        &self,
        names: &[&str],
        usage: ExtendedKeyUsagePurpose,
        expired: bool,
    ) -> Result<CertAndKey, rcgen::Error> {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names.clone())?;
        if let Some(first) = names.first() {
            params
                .distinguished_name
                .push(DnType::CommonName, first.as_str());
        }
        params.extended_key_usages = vec![usage];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        } else {
            // From the start of last year to the start of the year after next.
            let year = this_year();
            params.not_before = rcgen::date_time_ymd(year - 1, 1, 1);
            params.not_after = rcgen::date_time_ymd(year + 2, 1, 1);
        }
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.ca)?;
        Ok(CertAndKey {
            cert_pem: cert.pem(),
            key_pem: Zeroizing::new(key.serialize_pem()),
        })
    }

    /// A server certificate valid for `names` (DNS names or IP addresses).
    pub fn server(&self, names: &[&str]) -> Result<CertAndKey, rcgen::Error> {
        self.issue(names, ExtendedKeyUsagePurpose::ServerAuth, false)
    }

    /// A client certificate naming `edge_id` (as a DNS `subjectAltName`).
    pub fn client(&self, edge_id: &str) -> Result<CertAndKey, rcgen::Error> {
        self.issue(&[edge_id], ExtendedKeyUsagePurpose::ClientAuth, false)
    }

    /// A server certificate for `names` that expired in 2021.
    pub fn expired_server(&self, names: &[&str]) -> Result<CertAndKey, rcgen::Error> {
        self.issue(names, ExtendedKeyUsagePurpose::ServerAuth, true)
    }

    /// A client certificate for `edge_id` that expired in 2021.
    pub fn expired_client(&self, edge_id: &str) -> Result<CertAndKey, rcgen::Error> {
        self.issue(&[edge_id], ExtendedKeyUsagePurpose::ClientAuth, true)
    }
}

/// The current year (UTC), near enough for validity periods of whole years.
fn this_year() -> i32 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // Mean Gregorian year: 365.2425 days.
    1970 + i32::try_from(secs / 31_556_952).unwrap_or(0)
}

/// Writes a test PKI into `dir` (created if missing): `ca.pem`; `server.pem` and
/// `server.key` valid for `localhost` and `127.0.0.1`; `<edge_id>.pem` and
/// `<edge_id>.key` for each edge id. Every file is created new with mode 0600 (Unix):
/// a file already there — a symlink included, which is never followed — is an error,
/// not overwritten. Returns the files written.
pub fn write_test_certs(dir: &Path, edge_ids: &[String]) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    for edge_id in edge_ids {
        iop_core::ids::validate_id("edge id", edge_id).map_err(|e| e.to_string())?;
    }
    let pki = TestPki::new("iop test CA").map_err(|e| e.to_string())?;
    let mut written = Vec::new();
    let mut put = |name: &str, text: &str| -> Result<(), String> {
        let path = dir.join(name);
        write_new(&path, text.as_bytes()).map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => format!(
                "{}: already exists (gen-test-certs writes new files only): remove it, or give another DIR",
                path.display()
            ),
            _ => format!("{}: cannot write: {e}", path.display()),
        })?;
        written.push(path);
        Ok(())
    };
    put("ca.pem", &pki.ca_pem())?;
    let server = pki
        .server(&["localhost", "127.0.0.1"])
        .map_err(|e| e.to_string())?;
    put("server.pem", &server.cert_pem)?;
    put("server.key", &server.key_pem)?;
    for edge_id in edge_ids {
        let client = pki.client(edge_id).map_err(|e| e.to_string())?;
        put(&format!("{edge_id}.pem"), &client.cert_pem)?;
        put(&format!("{edge_id}.key"), &client.key_pem)?;
    }
    Ok(written)
}

/// Creates `path`, which must not exist (`O_EXCL`: a symlink there is not followed
/// but refused), readable by its owner only.
fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    options.open(path)?.write_all(bytes)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn files_are_new_private_and_never_written_through_a_symlink() {
        let dir = std::env::temp_dir().join(format!("iop-gen-certs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let written = write_test_certs(&dir, &["edge-1".into()]).unwrap();
        assert_eq!(written.len(), 5);
        for path in &written {
            let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", path.display());
        }
        // A second run refuses to overwrite.
        let err = write_test_certs(&dir, &[]).unwrap_err();
        assert!(err.contains("already exists"), "{err}");
        // A symlink planted where a file goes is refused, its target untouched.
        let other = dir.join("elsewhere");
        std::fs::create_dir_all(&other).unwrap();
        let target = other.join("victim");
        std::fs::write(&target, "keep").unwrap();
        let fresh = dir.join("fresh");
        std::fs::create_dir_all(&fresh).unwrap();
        std::os::unix::fs::symlink(&target, fresh.join("ca.pem")).unwrap();
        assert!(write_test_certs(&fresh, &[]).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
