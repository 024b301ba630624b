//! A Control Plane's listener takes a fleet dialling at once: its backlog
//! (`iop_driver::LISTEN_BACKLOG`) holds far more than the 128 handshakes of `std`'s,
//! so connections not yet accepted complete instead of losing their SYN.

use std::net::TcpStream;
use std::time::Duration;

use iop_driver::Runtime;
use iop_tokio::Tokio;

/// Connections the test opens against a listener that accepts none.
const DIALS: usize = 600;

fn somaxconn() -> Option<usize> {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[tokio::test]
async fn connections_not_yet_accepted_complete_past_std_s_backlog() {
    if somaxconn().is_none_or(|max| max < DIALS) {
        // The kernel caps the backlog below what this test needs (or is not Linux).
        return;
    }
    let listener = Tokio::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = Tokio::local_addr(&listener).unwrap();
    let dialled = tokio::task::spawn_blocking(move || {
        (0..DIALS)
            .map(|_| TcpStream::connect_timeout(&addr, Duration::from_millis(500)))
            .collect::<Result<Vec<_>, _>>()
            .map(|streams| streams.len())
    })
    .await
    .unwrap();
    assert_eq!(
        dialled.unwrap(),
        DIALS,
        "every handshake completed unaccepted"
    );
    drop(listener);
}
