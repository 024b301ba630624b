//! The `iop_core::testing::Pair` faults do what they say, and both ends react as
//! PROTOCOL.md §4.1–§4.2 ask: a cut link is noticed by liveness on both sides, a half-open
//! link by the side not told, a duplicate process supersedes and flaps, a stalled CP
//! and a clock jump are survived; scripted fake peers — an impostor Edge, a fake
//! Control Plane — take part on the pair's network.

use std::time::Duration;

use iop_core::cp::{self, CpConfig, CpEvent, Reachability};
use iop_core::edge::{self, EdgeConfig, EdgeEvent, TargetLevel};
use iop_core::registry::NodeRegistry;
use iop_core::testing::{NetConfig, Pair, Side};

const EDGE: &str = "edge-1";

fn config(seed: u64) -> EdgeConfig {
    EdgeConfig::new(EDGE, seed).with_operation("edge.ping", TargetLevel::Edge)
}

fn pair() -> Pair {
    let net = NetConfig {
        latency_min: Duration::from_millis(5),
        latency_max: Duration::from_millis(40),
        split_reads: true,
    };
    let mut p = Pair::new(9, CpConfig::default(), net).unwrap();
    p.add_edge(config(1), NodeRegistry::new()).unwrap();
    p.advance(Duration::from_secs(1));
    assert!(p.cp.live_conn(EDGE).is_some());
    p
}

fn clean(p: &Pair) {
    assert!(
        p.monitor().violations().is_empty(),
        "{:#?}",
        p.monitor().violations()
    );
}

fn edge_closed(p: &Pair, want: fn(&edge::CloseReason) -> bool) -> bool {
    p.edges[0]
        .events
        .iter()
        .any(|e| matches!(e, EdgeEvent::Closed { reason, .. } if want(reason)))
}

#[test]
fn a_cut_link_is_noticed_by_liveness_on_both_sides() {
    let mut p = pair();
    let old = p.conn_of(0).unwrap();
    p.cut(0);
    p.advance(Duration::from_secs(20));
    assert!(p.cp_events.iter().any(|e| matches!(e,
        CpEvent::Closed { conn, reason: cp::CloseReason::HeartbeatTimeout, .. } if *conn == old)));
    assert!(edge_closed(&p, |r| matches!(
        r,
        edge::CloseReason::PeerSilent
    )));
    p.advance(Duration::from_secs(30));
    assert_ne!(p.cp.live_conn(EDGE), Some(old));
    assert!(p.cp.live_conn(EDGE).is_some(), "the Edge came back");
    clean(&p);
}

#[test]
fn a_half_open_link_is_noticed_by_the_side_not_told() {
    let mut p = pair();
    p.half_open(0, Side::Cp);
    assert!(p.cp.live_conn(EDGE).is_none(), "the CP was told");
    assert!(p.edges[0].edge.is_connected(), "the Edge was not");
    p.advance(Duration::from_secs(16));
    assert!(edge_closed(&p, |r| matches!(
        r,
        edge::CloseReason::PeerSilent
    )));
    p.advance(Duration::from_secs(30));
    assert_eq!(
        p.cp.edge(EDGE).unwrap().reachability,
        Reachability::Connected
    );
    clean(&p);
}

#[test]
fn a_duplicate_process_supersedes_and_is_seen_flapping() {
    let mut p = pair();
    p.add_edge(config(2), NodeRegistry::new()).unwrap();
    p.advance(Duration::from_secs(60));
    let flapping = p.cp_events.iter().any(|e| {
        matches!(e, CpEvent::EdgeSuperseded { flapping: true, old_instance_id: Some(a), new_instance_id: Some(b), .. } if a != b)
    });
    assert!(flapping, "{:#?}", p.cp_events);
    assert!(p.edges.iter().all(|e| {
        e.events
            .iter()
            .any(|e| matches!(e, EdgeEvent::Superseded { .. }))
    }));
    // The duplicate dies: the survivor keeps the id.
    p.crash(1, true);
    p.advance(Duration::from_secs(30));
    assert!(p.cp.live_conn(EDGE).is_some());
    clean(&p);
}

#[test]
fn a_stalled_cp_and_a_clock_jump_are_survived() {
    let mut p = pair();
    p.silence_cp(Duration::from_secs(20));
    p.advance(Duration::from_secs(25));
    assert!(edge_closed(&p, |r| matches!(
        r,
        edge::CloseReason::PeerSilent
    )));
    p.jump(Duration::from_secs(90));
    p.advance(Duration::from_secs(60));
    assert!(p.cp.live_conn(EDGE).is_some());
    p.stale_close();
    assert!(
        p.cp.live_conn(EDGE).is_some(),
        "a stale close changes nothing"
    );
    assert_eq!(p.cp.stats().protocol_errors, 0);
    clean(&p);
}

#[test]
fn a_scripted_impostor_beside_a_real_edge_supersedes_it_and_is_superseded_in_turn() {
    use iop_core::proto::{Body, GoAwayReason};
    use iop_core::testing::scripted::edges::hello;

    let mut p = pair();
    let real = p.conn_of(0).unwrap();
    // A fake Edge on the pair's network (its latency and read splits) takes the id.
    let impostor = p.connect_scripted(None);
    p.write_scripted(
        impostor,
        &iop_core::testing::scripted::wire::frame(&hello(EDGE, &[]).into()),
    );
    p.advance(Duration::from_millis(200));
    assert_eq!(p.cp.live_conn(EDGE), Some(impostor));
    assert!(edge_closed(&p, |r| matches!(
        r,
        edge::CloseReason::GoAway {
            reason: GoAwayReason::Superseded,
            ..
        }
    )));
    let frames = p.take_scripted_frames(impostor);
    assert!(matches!(&frames[0].body, Some(Body::HelloResponse(r)) if r.accepted));

    // The real Edge dials again after its backoff and takes its id back; the impostor
    // is told SUPERSEDED and closed.
    p.advance(Duration::from_secs(40));
    let back = p.cp.live_conn(EDGE).unwrap();
    assert!(back != real && back != impostor);
    let frames = p.take_scripted_frames(impostor);
    assert!(frames.iter().any(|f| matches!(
        &f.body,
        Some(Body::GoAway(g)) if g.reason == GoAwayReason::Superseded as i32
    )));
    assert!(p.scripted(impostor).unwrap().closed);
    // The CP's side of the rules held on every connection, the impostor's included.
    clean(&p);
}

#[test]
fn a_real_edge_against_a_scripted_control_plane_over_a_lossy_network() {
    use iop_core::proto::{Body, EdgeStatusRequest, Envelope, GoAwayReason};
    use iop_core::testing::scripted::control_plane::accepted;

    let net = NetConfig {
        latency_min: Duration::from_millis(5),
        latency_max: Duration::from_millis(40),
        split_reads: true,
    };
    let mut p = Pair::new(3, CpConfig::default(), net).unwrap();
    let index = p
        .add_edge_to_scripted_cp(config(1), NodeRegistry::new())
        .unwrap();
    p.advance(Duration::from_millis(100));
    let conn = p.conn_of(index).expect("dialled the scripted CP");
    assert_eq!(p.cp.connection_count(), 0, "the pair's own CP never saw it");
    let hello = p.take_cp_frames(conn);
    assert!(matches!(&hello[0].body, Some(Body::HelloRequest(h)) if h.edge_id == EDGE));

    // Accepted, then a status request: the answer comes back across split reads.
    p.send_to_edge(conn, Envelope::new(accepted(7, 1_000)));
    p.send_to_edge(conn, Envelope::correlated(1, EdgeStatusRequest::default()));
    p.advance(Duration::from_millis(200));
    let frames = p.take_cp_frames(conn);
    assert!(frames.iter().any(|f| f.correlation_id == 1
        && matches!(&f.body, Some(Body::StatusResponse(s)) if s.edge_id == EDGE)));

    // A second hello response breaks the protocol: the Edge says so and redials.
    p.send_to_edge(conn, Envelope::new(accepted(8, 1_000)));
    p.advance(Duration::from_millis(200));
    assert!(p.take_cp_frames(conn).iter().any(|f| matches!(
        &f.body,
        Some(Body::GoAway(g)) if g.reason == GoAwayReason::ProtocolError as i32
    )));
    assert!(edge_closed(&p, |r| matches!(
        r,
        edge::CloseReason::ProtocolError(_)
    )));
    p.advance(Duration::from_secs(5));
    let again = p.conn_of(index).expect("redialled");
    assert_ne!(again, conn);
    assert!(matches!(
        &p.take_cp_frames(again)[0].body,
        Some(Body::HelloRequest(_))
    ));
    // What the Edge wrote kept the protocol's rules; the protocol error it saw was the
    // script's.
    clean(&p);
}
