//! What `iop-control-plane` re-reads on SIGHUP, without dropping a connected Edge: the
//! enrolment file, the TLS certificate, key and client CA, and the admin tokens. New
//! hellos and new handshakes use what was read; live sessions are untouched (an Edge
//! whose entry was removed or whose credential changed is disconnected
//! `CREDENTIAL_REVOKED`); a removed admin token is refused at once and its event
//! streams end. A file that does not load is logged and what was in force stays; so is
//! an enrolment file that lists no Edge at all (empty, or cut short by an editor),
//! unless [`Reloadable::allow_empty_enrolment`].

use std::path::PathBuf;

use iop_driver::tls::ServerTls;

use super::EnrolFile;
use super::admin::serve::AdminTls;
use super::admin::{AdminTokens, TokenBook};
use super::private_file::check_private;
use iop_tokio::{ControlPlaneHandle, EnrolmentPolicy};

/// The files of a Control Plane's TLS.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// Certificate chain (PEM).
    pub cert: PathBuf,
    /// Private key (PEM), readable by its owner only.
    pub key: PathBuf,
    /// CA of client certificates, for mutual TLS.
    pub client_ca: Option<PathBuf>,
}

impl TlsFiles {
    /// Loads them; the key file must be readable by its owner only.
    pub fn load(&self) -> Result<ServerTls, String> {
        check_private(&self.key).map_err(|e| e.to_string())?;
        ServerTls::from_pem_files(&self.cert, &self.key, self.client_ca.as_deref())
            .map_err(|e| e.to_string())
    }
}

/// The files a reload re-reads.
#[derive(Debug, Clone, Default)]
pub struct Reloadable {
    /// `--enroll`.
    pub enroll: Option<PathBuf>,
    /// `--allow-empty-enrolment`: an enrolment file listing no Edge is put in force.
    pub allow_empty_enrolment: bool,
    /// `--tls-cert`, `--tls-key`, `--tls-client-ca`.
    pub tls: Option<TlsFiles>,
    /// `--admin-token-file`, and the tokens in force it replaces.
    pub admin_tokens: Option<(PathBuf, TokenBook)>,
    /// `--admin-tls-cert`, `--admin-tls-key`, and the admin API's certificate in force.
    pub admin_tls: Option<(TlsFiles, AdminTls)>,
}

/// What one reload did, item by item: `Ok` with what was loaded, `Err` with why the
/// old one stays.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reloaded {
    /// The enrolment file: how many Edges it lists.
    pub enrolment: Option<Result<usize, String>>,
    /// The TLS material.
    pub tls: Option<Result<(), String>>,
    /// The admin tokens: how many are in force.
    pub admin_tokens: Option<Result<usize, String>>,
    /// The admin API's TLS certificate.
    pub admin_tls: Option<Result<(), String>>,
}

impl Reloadable {
    /// Re-reads every file and puts what loads in force on `cp`.
    pub fn reload(&self, cp: &ControlPlaneHandle) -> Reloaded {
        let enrolment = self.enroll.as_ref().map(|path| {
            let file = EnrolFile::load(path).map_err(|e| e.to_string())?;
            let n = file.edge_ids.len();
            if n == 0 && !self.allow_empty_enrolment {
                return Err(format!(
                    "{}: lists no Edge; refused, as it would disconnect every Edge \
                     (--allow-empty-enrolment to allow it)",
                    path.display()
                ));
            }
            cp.set_enrolment_policy(EnrolmentPolicy::AllowList(file.allow_list));
            Ok(n)
        });
        let tls = self.tls.as_ref().map(|files| {
            let tls = files.load()?;
            cp.set_tls(tls).map_err(|e| e.to_string())
        });
        let admin_tokens = self.admin_tokens.as_ref().map(|(path, book)| {
            let tokens = AdminTokens::load(path).map_err(|e| e.to_string())?;
            let n = tokens.len();
            book.replace(tokens);
            Ok(n)
        });
        let admin_tls = self.admin_tls.as_ref().map(|(files, admin)| {
            admin.replace(files.load()?);
            Ok(())
        });
        Reloaded {
            enrolment,
            tls,
            admin_tokens,
            admin_tls,
        }
    }

    /// Reloads on every SIGHUP (Unix), for the life of the process, logging what it
    /// did. Installed before the caller reports itself started, so that a SIGHUP sent
    /// after that is never fatal.
    #[cfg(unix)]
    pub fn on_sighup(self, cp: ControlPlaneHandle) -> std::io::Result<()> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hangups = signal(SignalKind::hangup())?;
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                let done = self.reload(&cp);
                match done.enrolment {
                    None => tracing::info!("SIGHUP: no --enroll file to reload"),
                    Some(Ok(edges)) => tracing::info!(edges, "enrolment file reloaded"),
                    Some(Err(error)) => tracing::error!(
                        %error,
                        "enrolment file reload failed; the previous allow list stays in force"
                    ),
                }
                match done.admin_tokens {
                    None => {}
                    Some(Ok(tokens)) => tracing::info!(tokens, "admin tokens reloaded"),
                    Some(Err(error)) => tracing::error!(
                        %error,
                        "admin token reload failed; the previous tokens stay in force"
                    ),
                }
                match done.admin_tls {
                    None => {}
                    Some(Ok(())) => tracing::info!("admin TLS certificate reloaded"),
                    Some(Err(error)) => tracing::error!(
                        %error,
                        "admin TLS reload failed; the previous certificate stays in force"
                    ),
                }
                match done.tls {
                    None => {}
                    Some(Ok(())) => {
                        tracing::info!("TLS certificate reloaded: new handshakes use it")
                    }
                    Some(Err(error)) => tracing::error!(
                        %error,
                        "TLS reload failed; the previous certificate stays in force"
                    ),
                }
            }
        });
        Ok(())
    }

    /// Nothing to watch without Unix signals.
    #[cfg(not(unix))]
    pub fn on_sighup(self, _cp: ControlPlaneHandle) -> std::io::Result<()> {
        Ok(())
    }
}
