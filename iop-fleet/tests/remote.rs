//! The Edges other replicas hold: one replica's changes, published as numbered
//! batches, folded into another's placement and watch — whatever is lost on the way,
//! a snapshot puts the receiver back in step; a moved Edge is filed under its newest
//! holder; an Edge held here wins over what others say of it.

mod common;

use std::sync::Arc;

use common::{P, Publisher, accepted, deliver, load_view, p};
use iop_core::cp::load::{EdgeLoad, LoadChange};
use iop_core::cp::{CloseReason, CpEvent, ForgetReason};
use iop_core::proto::cluster::LoadBatch;
use iop_core::proto::cluster::edge_load_change::Change;
use iop_fleet::{ChangeKind, Fleet, FleetConfig, PlacementQuery};
use proptest::prelude::*;

fn edge(id: &str, providers: &[P]) -> Arc<EdgeLoad> {
    common::view(id, &[("eu", providers.to_vec())])
}

/// The candidates for model `m` at `now`: (edge, node, provider, free, in_flight).
fn placed(fleet: &mut Fleet, now: u64) -> Vec<(String, String, String, u32, u32)> {
    let mut query = PlacementQuery::new("m");
    query.limit = 100;
    let answer = fleet.placement(&query, now).unwrap();
    answer
        .candidates
        .iter()
        .map(|c| {
            let free = c.capacity - c.in_flight;
            (
                c.edge_id.to_string(),
                c.node_id.clone(),
                c.provider_id.clone(),
                free,
                c.in_flight,
            )
        })
        .collect()
}

#[test]
fn a_change_on_one_replica_reaches_anothers_placement_and_watch() {
    let mut a = Publisher::new("a", 7);
    let mut b = Fleet::new(FleetConfig::default()).unwrap();
    a.fleet.handle_event(&accepted("e1", true));
    let before = edge("e1", &[p("llama", "m", 4, 0, 0)]);
    a.fleet.handle_event(&load_view(
        "e1",
        1_000,
        LoadChange::Replaced(before.clone()),
    ));
    // The first batch of a publisher asks for its snapshot.
    let first = a.batch();
    assert!(b.apply_remote(&first).resync);
    assert_eq!(b.remote_syncing().collect::<Vec<_>>(), ["a"]);
    let applied = b.apply_snapshot(&a.snapshot(10));
    assert_eq!((applied.applied, applied.resync), (1, false));
    assert_eq!(b.remote_syncing().count(), 0);
    assert_eq!(placed(&mut b, 1_000), placed(&mut a.fleet, 1_000));
    assert_eq!(b.remote_edges(), 1);

    // A load update on a's Edge: the next batch carries only the changed numbers.
    let mut numbers = (*before).clone();
    let busy = iop_core::proto::ProviderLoad {
        node_id: "n0".into(),
        provider_id: "llama".into(),
        status: iop_core::proto::ProviderStatus::Available as i32,
        health: iop_core::proto::ProviderHealth::Healthy as i32,
        capacity: 4,
        in_flight: 3,
        admission_eligible: true,
        node_connected: true,
        ..Default::default()
    };
    let changed = numbers.apply(std::slice::from_ref(&busy)).changed;
    a.fleet.handle_event(&load_view(
        "e1",
        1_200,
        LoadChange::Updated {
            view: Arc::new(numbers),
            changed,
        },
    ));
    let batch = a.batch();
    assert_eq!(batch.changes.len(), 1);
    let applied = b.apply_remote(&batch);
    assert_eq!((applied.applied, applied.resync), (1, false));
    assert_eq!(placed(&mut b, 1_200)[0].4, 3);
    assert_eq!(placed(&mut b, 1_200), placed(&mut a.fleet, 1_200));
    // The watch on b shows it, naming a.
    let last = b.changes_since(0, 100).unwrap().pop().unwrap();
    assert!(matches!(last.kind, ChangeKind::Numbers { .. }));
    assert_eq!(last.replica.as_deref(), Some("a"));
    assert_eq!(b.watch_views().len(), 1);
    // A batch seen twice is skipped.
    assert_eq!(b.apply_remote(&batch).skipped, 1);

    // Changes b applies of a's Edges are not b's to publish.
    b.publish_load(true);
    a.fleet
        .handle_event(&load_view("e1", 1_300, LoadChange::Confirmed));
    assert_eq!(b.apply_remote(&a.batch()).applied, 1);
    assert_eq!(b.pending_load_changes(), 0);
    assert!(b.take_load_changes(10).is_empty());
}

#[test]
fn a_missed_batch_asks_for_a_snapshot_which_forgets_what_the_publisher_no_longer_holds() {
    let mut a = Publisher::new("a", 1);
    let mut b = Fleet::new(FleetConfig::default()).unwrap();
    for id in ["e1", "e2"] {
        a.fleet.handle_event(&accepted(id, false));
        let view = edge(id, &[p("llama", "m", 4, 1, 0)]);
        a.fleet
            .handle_event(&load_view(id, 1_000, LoadChange::Replaced(view)));
    }
    let first = a.batch();
    deliver(&a, &mut b, &first);
    assert_eq!(b.remote_edges(), 2);
    // e2 forgotten, and the batch saying so lost.
    a.fleet.handle_event(&CpEvent::EdgeForgotten {
        edge_id: "e2".into(),
        reason: ForgetReason::Asked,
        unfinished_commands: Vec::new(),
    });
    let _lost = a.batch();
    a.fleet.handle_event(&CpEvent::EdgeDisconnected {
        edge_id: "e1".into(),
        session_id: 1,
        reason: CloseReason::TransportClosed,
    });
    let next = a.batch();
    let applied = b.apply_remote(&next);
    assert!(applied.resync, "a gap asks for a snapshot");
    assert_eq!(b.remote_edges(), 2, "until it comes, e2 stays");
    assert!(!b.apply_snapshot(&a.snapshot(1)).resync);
    assert_eq!(b.remote_edges(), 1);
    let offline = b.placement(&PlacementQuery::new("m"), 1_000).unwrap();
    assert_eq!((offline.candidates.len(), offline.excluded.offline), (0, 1));
    // A restarted publisher's Edges from before are gone at its first batch.
    let mut again = Publisher::new("a", 2);
    let applied = b.apply_remote(&again.batch());
    assert!(applied.resync);
    assert_eq!(b.remote_edges(), 0);
    // A snapshot of the earlier run is skipped.
    assert_eq!(b.apply_snapshot(&a.snapshot(10)).applied, 0);
}

#[test]
fn a_moved_edge_is_filed_under_its_new_holder_and_one_held_here_wins() {
    let mut a = Publisher::new("a", 1);
    let mut c = Publisher::new("c", 1);
    let mut b = Fleet::new(FleetConfig::default()).unwrap();
    a.fleet.handle_event(&accepted("e1", true));
    let on_a = edge("e1", &[p("llama", "m", 4, 0, 0)]);
    a.fleet
        .handle_event(&load_view("e1", 1_000, LoadChange::Replaced(on_a)));
    let first = a.batch();
    deliver(&a, &mut b, &first);
    // e1 moves to c; c's view comes before a's word that it lost it.
    c.fleet.handle_event(&accepted("e1", true));
    let on_c = edge("e1", &[p("llama", "m", 8, 0, 0)]);
    c.fleet
        .handle_event(&load_view("e1", 1_100, LoadChange::Replaced(on_c)));
    let from_c = c.batch();
    deliver(&c, &mut b, &from_c);
    a.fleet.handle_event(&CpEvent::EdgeDisconnected {
        edge_id: "e1".into(),
        session_id: 1,
        reason: CloseReason::TransportClosed,
    });
    assert!(a.fleet.set_elsewhere("e1"));
    b.apply_remote(&a.batch());
    assert_eq!(placed(&mut b, 1_100)[0].3, 8, "c's view stands");
    // And a's snapshot, without e1, takes nothing from c.
    b.apply_snapshot(&a.snapshot(10));
    assert_eq!(b.remote_edges(), 1);

    // e1 comes to b itself: its own session wins over c's word.
    b.handle_event(&accepted("e1", true));
    let here = edge("e1", &[p("llama", "m", 2, 0, 0)]);
    b.handle_event(&load_view("e1", 1_200, LoadChange::Replaced(here)));
    assert_eq!(b.remote_edges(), 0);
    let mut late = (*edge("e1", &[p("llama", "m", 8, 0, 0)])).clone();
    let numbers = late.apply(&[]);
    c.fleet.handle_event(&load_view(
        "e1",
        1_300,
        LoadChange::Updated {
            view: Arc::new(late),
            changed: numbers.changed,
        },
    ));
    c.fleet
        .handle_event(&load_view("e1", 1_300, LoadChange::Confirmed));
    let applied = b.apply_remote(&c.batch());
    assert_eq!(applied.applied, 0);
    assert_eq!(placed(&mut b, 1_300)[0].3, 2, "b's own view stands");
}

/// What happens on the publishing replica, or to a batch on the way.
#[derive(Debug, Clone)]
enum Op {
    /// Edge `e` connects (pushing or not) and reports providers with these in-flight
    /// counts.
    Connect(usize, bool, [u32; 2]),
    /// A load update of provider `i` of Edge `e`.
    Update(usize, usize, u32),
    Confirm(usize),
    Disconnect(usize),
    Forget(usize),
    /// The next batch is lost.
    Lose,
    /// The next batch is held back: it arrives late, after the one that follows it.
    Hold,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3usize, any::<bool>(), [0..5u32, 0..5u32]).prop_map(|(e, pu, n)| Op::Connect(e, pu, n)),
        (0..3usize, 0..2usize, 0..5u32).prop_map(|(e, i, n)| Op::Update(e, i, n)),
        (0..3usize).prop_map(Op::Confirm),
        (0..3usize).prop_map(Op::Disconnect),
        (0..3usize).prop_map(Op::Forget),
        Just(Op::Lose),
        Just(Op::Hold),
    ]
}

fn providers(n: [u32; 2]) -> Vec<P> {
    vec![p("p0", "m", 4, n[0], 0), p("p1", "m", 4, n[1], 1)]
}

proptest! {
    /// Whatever is lost or delayed on the way, once the publisher's latest batch is
    /// heard (and a snapshot asked for is applied), the receiver places exactly as the
    /// publisher does.
    #[test]
    fn the_receiver_places_as_the_publisher_after_its_latest_batch(ops in prop::collection::vec(op(), 1..40)) {
        let mut a = Publisher::new("a", 1);
        let mut b = Fleet::new(FleetConfig::default()).unwrap();
        let mut live: [Option<Arc<EdgeLoad>>; 3] = [None, None, None];
        let mut held = Vec::new();
        let (mut lose, mut hold) = (false, false);
        let mut at = 1_000;
        for op in ops {
            at += 10;
            let id = |e: usize| format!("e{e}");
            match op {
                Op::Connect(e, pushes, n) => {
                    a.fleet.handle_event(&accepted(&id(e), pushes));
                    let view = edge(&id(e), &providers(n));
                    live[e] = Some(view.clone());
                    a.fleet.handle_event(&load_view(&id(e), at, LoadChange::Replaced(view)));
                }
                Op::Update(e, i, n) => {
                    let Some(view) = &live[e] else { continue };
                    let mut next = (**view).clone();
                    let provider = view.providers().nth(i).unwrap();
                    let load = iop_core::proto::ProviderLoad {
                        node_id: "n0".into(),
                        provider_id: provider.provider_id().into(),
                        status: iop_core::proto::ProviderStatus::Available as i32,
                        health: iop_core::proto::ProviderHealth::Healthy as i32,
                        capacity: 4,
                        in_flight: n,
                        queued: provider.queued(),
                        admission_eligible: true,
                        node_connected: true,
                        ..Default::default()
                    };
                    let changed = next.apply(&[load]).changed;
                    let next = Arc::new(next);
                    live[e] = Some(next.clone());
                    a.fleet.handle_event(&load_view(&id(e), at, LoadChange::Updated { view: next, changed }));
                }
                Op::Confirm(e) => {
                    if live[e].is_some() {
                        a.fleet.handle_event(&load_view(&id(e), at, LoadChange::Confirmed));
                    }
                }
                Op::Disconnect(e) => {
                    live[e] = None;
                    a.fleet.handle_event(&CpEvent::EdgeDisconnected {
                        edge_id: id(e), session_id: 1, reason: CloseReason::TransportClosed,
                    });
                }
                Op::Forget(e) => {
                    live[e] = None;
                    a.fleet.handle_event(&CpEvent::EdgeForgotten {
                        edge_id: id(e), reason: ForgetReason::Asked, unfinished_commands: Vec::new(),
                    });
                }
                Op::Lose => {
                    lose = true;
                    continue;
                }
                Op::Hold => {
                    hold = true;
                    continue;
                }
            }
            let batch = a.batch();
            if std::mem::take(&mut lose) {
                continue;
            }
            if std::mem::take(&mut hold) {
                held.push(batch);
                continue;
            }
            // Held batches arrive after this one: late, skipped.
            deliver(&a, &mut b, &batch);
            for late in held.drain(..) {
                deliver(&a, &mut b, &late);
            }
        }
        let last = a.batch();
        deliver(&a, &mut b, &last);
        if b.remote_syncing().next().is_some() {
            b.apply_snapshot(&a.snapshot(2));
        }
        prop_assert_eq!(b.remote_syncing().count(), 0);
        // The same candidates with the same numbers (ties in free slots and queue may
        // rank apart: after a snapshot the receiver dates each provider's numbers by
        // its Edge's view).
        let (mut there, mut here) = (placed(&mut a.fleet, at), placed(&mut b, at));
        there.sort();
        here.sort();
        prop_assert_eq!(here, there);
        let query = PlacementQuery::new("m");
        prop_assert_eq!(
            b.placement(&query, at).unwrap().excluded,
            a.fleet.placement(&query, at).unwrap().excluded
        );
    }
}

#[test]
fn what_a_replica_publishes_is_coalesced_per_edge_and_told_as_it_stands() {
    let mut a = Publisher::new("a", 1);
    let quiet = Fleet::new(FleetConfig::default()).unwrap();
    assert_eq!(quiet.pending_load_changes(), 0);
    a.fleet.handle_event(&accepted("e1", true));
    let view = edge("e1", &[p("p0", "m", 4, 0, 0), p("p1", "m", 4, 0, 0)]);
    a.fleet
        .handle_event(&load_view("e1", 1_000, LoadChange::Replaced(view.clone())));
    // A new view, then numbers: one whole view, as it stands after the numbers.
    let update = |load: &Arc<EdgeLoad>, provider: &str, in_flight: u32| {
        let mut next = (**load).clone();
        let changed = next
            .apply(&[iop_core::proto::ProviderLoad {
                node_id: "n0".into(),
                provider_id: provider.into(),
                status: iop_core::proto::ProviderStatus::Available as i32,
                health: iop_core::proto::ProviderHealth::Healthy as i32,
                capacity: 4,
                in_flight,
                admission_eligible: true,
                node_connected: true,
                ..Default::default()
            }])
            .changed;
        (Arc::new(next), changed)
    };
    let (v1, changed) = update(&view, "p0", 1);
    let numbers = |view: Arc<EdgeLoad>, changed| LoadChange::Updated { view, changed };
    a.fleet
        .handle_event(&load_view("e1", 1_100, numbers(v1.clone(), changed)));
    let batch = a.batch();
    assert_eq!(batch.changes.len(), 1);
    let Some(Change::View(whole)) = &batch.changes[0].change else {
        panic!("a whole view, not {:?}", batch.changes[0].change);
    };
    let status = whole.status.as_ref().unwrap();
    assert_eq!(status.nodes[0].provider_snapshots[0].in_flight, 1);
    assert!(batch.changes[0].pushes);
    // Numbers of two providers over three updates: one message of both, latest values.
    let (v2, c2) = update(&v1, "p1", 2);
    a.fleet
        .handle_event(&load_view("e1", 1_200, numbers(v2.clone(), c2)));
    let (v3, c3) = update(&v2, "p0", 3);
    a.fleet
        .handle_event(&load_view("e1", 1_300, numbers(v3, c3)));
    a.fleet
        .handle_event(&load_view("e1", 1_400, LoadChange::Confirmed));
    let batch = a.batch();
    assert_eq!(batch.changes.len(), 1);
    assert_eq!(batch.changes[0].at_unix_ms, 1_400);
    let Some(Change::Numbers(loads)) = &batch.changes[0].change else {
        panic!("numbers, not {:?}", batch.changes[0].change);
    };
    let told: Vec<(&str, u32)> = loads
        .loads
        .iter()
        .map(|l| (l.provider_id.as_str(), l.in_flight))
        .collect();
    assert_eq!(told, [("p0", 3), ("p1", 2)]);
    // Nothing since: nothing to tell; then gone.
    assert!(a.batch().changes.is_empty());
    a.fleet.handle_event(&CpEvent::EdgeForgotten {
        edge_id: "e1".into(),
        reason: ForgetReason::Asked,
        unfinished_commands: Vec::new(),
    });
    let batch = a.batch();
    assert!(matches!(batch.changes[0].change, Some(Change::Gone(true))));
}

#[test]
fn the_replicas_followed_are_bounded() {
    let mut b = Fleet::new(FleetConfig::default()).unwrap();
    for r in 0..iop_fleet::MAX_REMOTE_REPLICAS {
        let batch = LoadBatch {
            replica: format!("r{r}"),
            epoch: 1,
            seq: 1,
            ..Default::default()
        };
        assert!(b.apply_remote(&batch).resync);
    }
    let mut one_more = Publisher::new("late", 1);
    one_more.fleet.handle_event(&accepted("e1", true));
    let view = edge("e1", &[p("llama", "m", 4, 0, 0)]);
    one_more
        .fleet
        .handle_event(&load_view("e1", 1_000, LoadChange::Replaced(view)));
    let applied = b.apply_remote(&one_more.batch());
    assert_eq!(
        (applied.applied, applied.skipped, applied.resync),
        (0, 1, false)
    );
    assert_eq!(b.remote_replicas().count(), iop_fleet::MAX_REMOTE_REPLICAS);
    assert_eq!(b.remote_edges(), 0);
}

#[test]
fn an_edge_that_moved_stays_placed_when_its_old_replica_lets_it_go() {
    let mut c = Publisher::new("c", 1);
    let mut b = Fleet::new(FleetConfig::default()).unwrap();
    // e1 was b's own, and disconnected from b.
    b.handle_event(&accepted("e1", true));
    let old = edge("e1", &[p("llama", "m", 4, 0, 0)]);
    b.handle_event(&load_view("e1", 1_000, LoadChange::Replaced(old)));
    b.handle_event(&CpEvent::EdgeDisconnected {
        edge_id: "e1".into(),
        session_id: 1,
        reason: CloseReason::TransportClosed,
    });
    // c's view of it comes before b learns that c holds it.
    c.fleet.handle_event(&accepted("e1", true));
    let on_c = edge("e1", &[p("llama", "m", 8, 0, 0)]);
    c.fleet
        .handle_event(&load_view("e1", 1_100, LoadChange::Replaced(on_c)));
    let batch = c.batch();
    deliver(&c, &mut b, &batch);
    assert_eq!(placed(&mut b, 1_100)[0].3, 8);
    // b learns it, then forgets its own old view: c's stands.
    assert!(b.set_elsewhere("e1"));
    assert_eq!(placed(&mut b, 1_100)[0].3, 8);
    b.handle_event(&CpEvent::EdgeForgotten {
        edge_id: "e1".into(),
        reason: ForgetReason::Asked,
        unfinished_commands: Vec::new(),
    });
    assert_eq!(placed(&mut b, 1_100)[0].3, 8);
    assert_eq!(b.watch_views().len(), 1);
}
