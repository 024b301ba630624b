//! The three measurements that showed the replicas failing under faults, replayed
//! against the binaries, each with the outcome PROTOCOL.md §8 asks for.

use std::time::{Duration, Instant};

use super::checker::own_sessions;
use super::fleet::Fleet;
use super::http;

fn lists(admin: std::net::SocketAddr, edges: &[&str]) -> bool {
    http::get_json(admin, "/v1/edges", Duration::from_secs(2)).is_some_and(|v| {
        edges.iter().all(|e| {
            v["edges"].as_array().is_some_and(|list| {
                list.iter()
                    .any(|x| x["edgeId"] == *e && x["connected"] == true)
            })
        })
    })
}

fn until(what: &str, within: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(250));
    }
    start.elapsed()
}

/// The replicas holding a live session of `edge` by their own account.
fn holders(fleet: &Fleet, edge: &str) -> usize {
    fleet
        .cps
        .iter()
        .filter(|c| own_sessions(&c.id, c.admin).is_some_and(|o| o.contains_key(edge)))
        .count()
}

#[test]
#[ignore = "two minutes of real processes under faults: .ci/run runs it"]
fn the_measured_failures_converge() {
    super::require_nats();
    let dir = std::env::temp_dir().join(format!("iop-chaos-repro-{}", std::process::id()));
    let mut fleet = Fleet::new(1, &dir);
    fleet.start_cp(0);
    fleet.start_cp(1);
    fleet.add_edge("edge-1", 0);
    until("edge-1 listed", Duration::from_secs(30), || {
        lists(fleet.cps[0].admin, &["edge-1"])
    });

    // 1. The engine stalls for 13 s; then a third replica starts with an Edge of its
    // own. Every replica lists both within 30 s (they listed edge-1 only, for ever).
    fleet.nats[0].lock().unwrap().pause();
    std::thread::sleep(Duration::from_secs(13));
    fleet.nats[0].lock().unwrap().resume();
    fleet.start_cp(2);
    fleet.add_edge("edge-2", 2);
    let took = until(
        "every replica lists both Edges",
        Duration::from_secs(30),
        || {
            fleet
                .cps
                .iter()
                .all(|c| lists(c.admin, &["edge-1", "edge-2"]))
        },
    );
    println!("   after a 13 s engine stall: every replica lists a later Edge after {took:?}");

    // 2. cp-0 cut off from the engine for 27 s (black-holed, then reset) while a second
    // process with edge-1's id enrols on cp-1: once the link heals, one replica holds a
    // live session of edge-1 (both did, 40 of 40 samples over 20 s, 45 s later).
    for p in &fleet.links[0] {
        p.blackhole();
    }
    fleet.add_edge("edge-1", 1);
    std::thread::sleep(Duration::from_secs(27));
    for p in &fleet.links[0] {
        p.reset();
    }
    let healed = until("one holder of edge-1", Duration::from_secs(30), || {
        holders(&fleet, "edge-1") <= 1
    });
    // The two processes go on superseding each other (each waits out its
    // retry_after): two holders last only as long as a supersession takes.
    let (mut overlap, mut longest) = (Duration::ZERO, Duration::ZERO);
    let watch = Instant::now();
    while watch.elapsed() < Duration::from_secs(20) {
        if holders(&fleet, "edge-1") > 1 {
            overlap += Duration::from_millis(500);
            longest = longest.max(overlap);
        } else {
            overlap = Duration::ZERO;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    println!(
        "   after a 27 s cut-off: one holder {healed:?} after the link healed; longest overlap over 20 s: {longest:?}"
    );
    assert!(
        longest < Duration::from_secs(3),
        "two holders for {longest:?}"
    );

    // 3. A command through cp-0 while it is cut off from the engine: refused
    // engine_unavailable and never run (it was answered 200, then unknown once cp-0
    // died).
    fleet.add_edge("edge-3", 0);
    until("edge-3 on cp-0", Duration::from_secs(30), || {
        own_sessions("cp-0", fleet.cps[0].admin).is_some_and(|o| o.contains_key("edge-3"))
    });
    for p in &fleet.links[0] {
        p.blackhole();
    }
    until(
        "cp-0 to see the engine gone",
        Duration::from_secs(30),
        || {
            http::get_json(fleet.cps[0].admin, "/healthz", Duration::from_secs(2))
                .is_some_and(|h| h["cluster"] == "degraded")
        },
    );
    let body = r#"{"operation":"edge.ping","commandId":"cut-off-1"}"#;
    let answer = http::request(
        fleet.cps[0].admin,
        "POST",
        "/v1/edges/edge-3/commands",
        Some(body),
        Duration::from_secs(10),
    );
    let (status, text) = answer.expect("an answer");
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("engine_unavailable"), "{text}");
    fleet.cps[0].kill();
    for p in &fleet.links[0] {
        p.reset();
    }
    until("edge-3 elsewhere", Duration::from_secs(30), || {
        fleet.cps[1..]
            .iter()
            .any(|c| own_sessions(&c.id, c.admin).is_some_and(|o| o.contains_key("edge-3")))
    });
    let ran = fleet.edges.iter().any(|e| {
        std::fs::read_to_string(&e.log)
            .unwrap_or_default()
            .contains("command_id=cut-off-1")
    });
    assert!(
        !ran,
        "a command refused engine_unavailable reached its edge"
    );
    drop(fleet);
    let _ = std::fs::remove_dir_all(&dir);
}
