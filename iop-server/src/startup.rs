//! Checks `iop-control-plane` and `iop-edge` make before they start, so that an
//! exposure or a limit the operator did not mean is said at once, with its fix.

use std::net::{IpAddr, SocketAddr};

/// The admin API serves without tokens only on a loopback address: anything else is
/// reachable by whoever can reach the address. `Err` is the usage message.
pub fn check_admin_exposure(admin: SocketAddr, has_tokens: bool) -> Result<(), String> {
    if has_tokens || admin.ip().is_loopback() {
        return Ok(());
    }
    Err(format!(
        "--admin {admin} is not a loopback address, and without --admin-token-file the \
         admin API has no authentication: give --admin-token-file FILE (one token per \
         line; see examples/README.md), or bind --admin to 127.0.0.1"
    ))
}

/// A warning when admin tokens would cross a network in clear: a token file with a
/// plaintext admin API on a non-loopback address.
pub fn admin_plaintext_warning(admin: SocketAddr, has_tokens: bool, tls: bool) -> Option<String> {
    (has_tokens && !tls && !admin.ip().is_loopback()).then(|| {
        format!(
            "--admin {admin} serves plain HTTP on a non-loopback address: admin tokens \
             cross the network in clear, and a sniffed one commands the fleet; give \
             --admin-tls-cert and --admin-tls-key"
        )
    })
}

/// A warning when Edges would send their credentials in clear over a network: an
/// enrolment file with a plaintext listener on a non-loopback address.
pub fn plaintext_enrolment_warning(listen: SocketAddr, tls: bool, enroll: bool) -> Option<String> {
    (enroll && !tls && !listen.ip().is_loopback()).then(|| {
        format!(
            "--enroll on a plaintext listener ({listen}): Edge credentials cross the \
             network in clear, and a sniffed one can take over its Edge; give \
             --tls-cert and --tls-key"
        )
    })
}

/// An Edge with a credential dialling a non-loopback address without TLS sends the
/// credential in clear: refused unless `allow_plaintext`. `Err` is the usage message.
pub fn check_edge_plaintext(
    control_plane: IpAddr,
    tls: bool,
    has_credential: bool,
    allow_plaintext: bool,
) -> Result<Option<String>, String> {
    if tls || !has_credential || control_plane.is_loopback() {
        return Ok(None);
    }
    let what = format!(
        "--credential-file without --tls-ca to {control_plane}: the credential would cross \
         the network in clear"
    );
    if allow_plaintext {
        return Ok(Some(format!("{what} (--allow-plaintext)")));
    }
    Err(format!(
        "{what}; give --tls-ca FILE (the CA of the Control Plane's certificate), or \
         --allow-plaintext on a network you trust"
    ))
}

/// The soft limit of open files of this process (Linux: `/proc/self/limits`).
pub fn open_files_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// File descriptors the process needs besides its Edge connections: listeners, admin
/// connections, logs.
pub const SPARE_FILES: u64 = 300;

/// The Edge connections a Control Plane holds by default under the open-files limit
/// `limit`: the protocol's default (§7), or what the limit leaves after
/// [`SPARE_FILES`] when that is lower (at least 64), so that the default never runs
/// into the limit.
pub fn default_max_connections(limit: Option<u64>) -> usize {
    let default = iop_core::proto::limits::DEFAULT_MAX_CONNECTIONS;
    match limit {
        Some(limit) => {
            let fits = usize::try_from(limit.saturating_sub(SPARE_FILES)).unwrap_or(usize::MAX);
            default.min(fits).max(64)
        }
        None => default,
    }
}

/// A warning when `max_connections` Edge connections (and the spare ones) would not
/// fit the open-files limit `limit`: past it accepts fail, however high the cap.
pub fn open_files_warning(limit: Option<u64>, max_connections: usize) -> Option<String> {
    let limit = limit?;
    let needed = max_connections as u64 + SPARE_FILES;
    (limit < needed).then(|| {
        let fits = limit.saturating_sub(SPARE_FILES);
        format!(
            "the open-files limit is {limit}, below the {needed} that --max-connections \
             {max_connections} needs: raise it (`ulimit -n {needed}`, or LimitNOFILE= in a \
             systemd unit) or lower --max-connections to {fits}"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposure_rules() {
        let lo: SocketAddr = "127.0.0.1:7701".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:7701".parse().unwrap();
        assert!(check_admin_exposure(lo, false).is_ok());
        assert!(check_admin_exposure(any, true).is_ok());
        let err = check_admin_exposure(any, false).unwrap_err();
        assert!(err.contains("--admin-token-file") && err.contains("127.0.0.1"));

        assert!(plaintext_enrolment_warning(any, false, true).is_some());
        assert!(plaintext_enrolment_warning(any, true, true).is_none());
        assert!(plaintext_enrolment_warning(lo, false, true).is_none());

        let warning = admin_plaintext_warning(any, true, false).unwrap();
        assert!(warning.contains("--admin-tls-cert"), "{warning}");
        assert!(admin_plaintext_warning(any, true, true).is_none());
        assert!(admin_plaintext_warning(lo, true, false).is_none());
        assert!(admin_plaintext_warning(any, false, false).is_none());

        let far: IpAddr = "10.0.0.1".parse().unwrap();
        assert!(check_edge_plaintext(far, false, true, false).is_err());
        assert!(
            check_edge_plaintext(far, false, true, true)
                .unwrap()
                .is_some()
        );
        assert_eq!(check_edge_plaintext(far, true, true, false), Ok(None));
        assert_eq!(check_edge_plaintext(lo.ip(), false, true, false), Ok(None));
    }

    #[test]
    fn open_files_are_compared_with_the_connection_cap() {
        assert!(open_files_warning(Some(20_000), 20_000).is_some());
        assert!(open_files_warning(Some(1 << 20), 20_000).is_none());
        assert!(open_files_warning(None, 20_000).is_none());
        // The default fits the limit, so it is never warned about.
        for limit in [Some(1_024), Some(20_000), Some(1 << 20), None] {
            let n = default_max_connections(limit);
            assert!(open_files_warning(limit, n).is_none(), "{limit:?}: {n}");
        }
        assert_eq!(default_max_connections(Some(20_000)), 19_700);
        assert_eq!(default_max_connections(Some(1 << 20)), 20_000);
        assert_eq!(default_max_connections(None), 20_000);
        let w = open_files_warning(Some(1_024), 20_000).unwrap();
        assert!(w.contains("ulimit -n 20300") && w.contains("--max-connections to 724"));
        // This machine's limit reads as a number (Linux).
        if cfg!(target_os = "linux") {
            assert!(open_files_limit().is_some());
        }
    }
}
