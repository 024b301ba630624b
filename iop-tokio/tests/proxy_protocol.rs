//! The PROXY protocol in front of the Edge listener: behind a load balancer of our
//! own (a loopback TCP proxy that writes a v1 or v2 header naming a made-up source),
//! Edges get their sessions, and the per-address cap counts each Edge's real address,
//! not the balancer's; a trusted peer without a header, or with a broken one, is
//! closed; an untrusted peer is served as it is.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use iop_tokio::ProxyProtocol;
use iop_tokio::prelude::*;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A v1 header naming `source` as the connection's source.
fn v1(source: SocketAddr, to: SocketAddr) -> Vec<u8> {
    format!(
        "PROXY TCP4 {} {} {} {}\r\n",
        source.ip(),
        to.ip(),
        source.port(),
        to.port()
    )
    .into_bytes()
}

/// A v2 header naming `source` (IPv4) as the connection's source.
fn v2(source: SocketAddr) -> Vec<u8> {
    let mut h = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    h.extend_from_slice(&[0x21, 0x11, 0, 12]);
    let SocketAddr::V4(source) = source else {
        panic!("an IPv4 source")
    };
    h.extend_from_slice(&source.ip().octets());
    h.extend_from_slice(&[127, 0, 0, 1]);
    h.extend_from_slice(&source.port().to_be_bytes());
    h.extend_from_slice(&7700u16.to_be_bytes());
    h
}

/// A load balancer on loopback: each connection it accepts goes to `cp`, preceded by
/// the header `header` makes for the n-th connection.
async fn balancer(
    cp: SocketAddr,
    header: impl Fn(usize) -> Vec<u8> + Send + 'static,
) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        for n in 0.. {
            let Ok((mut edge, _)) = listener.accept().await else {
                return;
            };
            let header = header(n);
            tokio::spawn(async move {
                let Ok(mut upstream) = TcpStream::connect(cp).await else {
                    return;
                };
                if upstream.write_all(&header).await.is_ok() {
                    let _ = tokio::io::copy_bidirectional(&mut edge, &mut upstream).await;
                }
            });
        }
    });
    addr
}

fn server_trusting(ranges: &[&str]) -> ServerConfig {
    let mut config = fast_server();
    config.proxy_protocol = Some(ProxyProtocol::trusting(ranges).unwrap());
    config
}

/// Whether the server closes `stream` within `within` (reads to its end).
async fn closed(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 1024];
    tokio::time::timeout(within, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

#[tokio::test]
async fn edges_behind_a_balancer_enrol_and_are_capped_by_their_real_address() {
    let mut config = server_trusting(&["127.0.0.0/8"]);
    config.max_pending_hellos_per_ip = 1;
    let server = ControlPlaneServer::bind(localhost(), config).await.unwrap();
    let cp = server.local_addr();

    // Whole sessions through a v1 and a v2 balancer.
    let through_v1 = balancer(cp, move |n| {
        v1(format!("198.51.100.{}:4000", n + 1).parse().unwrap(), cp)
    })
    .await;
    let through_v2 = balancer(cp, |n| {
        v2(format!("203.0.113.{}:5000", n + 1).parse().unwrap())
    })
    .await;
    let a = EdgeClient::new(fast_edge("edge-a"))
        .connect(through_v1)
        .unwrap();
    let b = EdgeClient::new(fast_edge("edge-b"))
        .connect(through_v2)
        .unwrap();
    bounded("edge-a's session", a.connected()).await.unwrap();
    bounded("edge-b's session", b.connected()).await.unwrap();

    // Connections that never say hello, all from the balancer's 127.0.0.1 on the
    // wire: one per real address awaits its hello; a second from the same real
    // address is refused, one from another is not.
    let mut held = Vec::new();
    for source in ["192.0.2.1:1", "192.0.2.2:1"] {
        let mut s = TcpStream::connect(cp).await.unwrap();
        s.write_all(&v1(source.parse().unwrap(), cp)).await.unwrap();
        held.push(s);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    for s in &mut held {
        assert!(!closed(s, Duration::from_millis(200)).await, "served");
    }
    let mut again = TcpStream::connect(cp).await.unwrap();
    again
        .write_all(&v1("192.0.2.1:2".parse().unwrap(), cp))
        .await
        .unwrap();
    assert!(
        closed(&mut again, Duration::from_secs(2)).await,
        "a second connection from 192.0.2.1 is refused at its address's cap"
    );
    assert!(server.handle().stats().connections_refused >= 1);
    a.shutdown().await;
    b.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_trusted_peer_must_send_a_valid_header_and_others_need_none() {
    let server = ControlPlaneServer::bind(localhost(), server_trusting(&["127.0.0.1"]))
        .await
        .unwrap();
    let cp = server.local_addr();
    // No header: the first bytes (a frame) are not one; closed, no session.
    let edge = EdgeClient::new(fast_edge("edge-direct"))
        .connect(cp)
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!edge.is_connected());
    assert_eq!(server.handle().stats().sessions_accepted, 0);
    edge.shutdown().await;
    // A broken header: closed.
    let mut s = TcpStream::connect(cp).await.unwrap();
    s.write_all(b"PROXY TCP4 999.1.1.1 127.0.0.1 1 2\r\n")
        .await
        .unwrap();
    assert!(closed(&mut s, Duration::from_secs(2)).await);
    // Half a header, then silence: closed at the hello timeout.
    let mut s = TcpStream::connect(cp).await.unwrap();
    s.write_all(b"PROXY TCP4 1.2").await.unwrap();
    assert!(closed(&mut s, Duration::from_secs(10)).await);
    server.shutdown().await;

    // Trusting only other peers: a direct Edge from 127.0.0.1 is served as ever.
    let server = ControlPlaneServer::bind(localhost(), server_trusting(&["10.0.0.0/8"]))
        .await
        .unwrap();
    let edge = EdgeClient::new(fast_edge("edge-direct"))
        .connect(server.local_addr())
        .unwrap();
    bounded("the direct session", edge.connected())
        .await
        .unwrap();
    edge.shutdown().await;
    server.shutdown().await;
}
