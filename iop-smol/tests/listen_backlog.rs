//! The smol listener's backlog is `iop_driver::LISTEN_BACKLOG`, not `std`'s 128:
//! connections not yet accepted complete instead of losing their SYN.

use std::net::TcpStream;
use std::time::Duration;

use iop_driver::Runtime;
use iop_smol::Smol;

/// Connections the test opens against a listener that accepts none.
const DIALS: usize = 600;

#[test]
fn connections_not_yet_accepted_complete_past_std_s_backlog() {
    let somaxconn: Option<usize> = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    if somaxconn.is_none_or(|max| max < DIALS) {
        // The kernel caps the backlog below what this test needs (or is not Linux).
        return;
    }
    let listener = smol::block_on(Smol::bind("127.0.0.1:0".parse().unwrap())).unwrap();
    let addr = Smol::local_addr(&listener).unwrap();
    let streams: Vec<TcpStream> = (0..DIALS)
        .map(|_| TcpStream::connect_timeout(&addr, Duration::from_millis(500)).unwrap())
        .collect();
    assert_eq!(streams.len(), DIALS, "every handshake completed unaccepted");
}
