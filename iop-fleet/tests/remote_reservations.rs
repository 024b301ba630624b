//! Reservations across replicas: a reserving placement on one replica is published
//! with its load changes and counted by every other replica as it is by the first —
//! as one more request in flight on the pick, until the provider's next report or
//! until its numbers would be stale — so routers asking different replicas at once
//! spread over the fleet instead of herding onto the same provider.

mod common;

use std::sync::Arc;

use common::{Publisher, accepted, deliver, load_view, p};
use iop_core::cp::load::{EdgeLoad, LoadChange};
use iop_core::proto::cluster::{LoadBatch, LoadReservation};
use iop_core::proto::{ProviderHealth, ProviderLoad, ProviderStatus};
use iop_fleet::{Fleet, MAX_PENDING_RESERVATIONS, PlacementQuery};

/// Tells `to` the next batch of `from` (its snapshot too when `to` asks for it): the
/// reservations `to` counted.
fn tell(from: &mut Publisher, to: &mut Fleet) -> usize {
    let batch = from.batch();
    deliver(from, to, &batch).reservations
}

/// Edge `e1` on replica `a`: node `n0` with two providers of model `m`, `big`
/// (capacity 4) and `small` (capacity 2), idle; told to `b`.
fn two_replicas() -> (Publisher, Publisher, Arc<EdgeLoad>) {
    let (mut a, mut b) = (Publisher::new("a", 1), Publisher::new("b", 1));
    a.fleet.handle_event(&accepted("e1", true));
    let view = common::view(
        "e1",
        &[("eu", vec![p("big", "m", 4, 0, 0), p("small", "m", 2, 0, 0)])],
    );
    a.fleet
        .handle_event(&load_view("e1", 1_000, LoadChange::Replaced(view.clone())));
    tell(&mut a, &mut b.fleet);
    (a, b, view)
}

/// The candidates for `m` at `now`: (provider, free, reserved), best first.
fn placed(fleet: &mut Fleet, now: u64) -> Vec<(String, u32, u32)> {
    let answer = fleet.placement(&PlacementQuery::new("m"), now).unwrap();
    answer
        .candidates
        .iter()
        .map(|c| (c.provider_id.clone(), c.free, c.reserved))
        .collect()
}

/// Provider `big`'s numbers with `in_flight` requests, as a load update carries them.
fn big(in_flight: u32) -> ProviderLoad {
    ProviderLoad {
        node_id: "n0".into(),
        provider_id: "big".into(),
        status: ProviderStatus::Available as i32,
        health: ProviderHealth::Healthy as i32,
        capacity: 4,
        in_flight,
        admission_eligible: true,
        node_connected: true,
        ..Default::default()
    }
}

#[test]
fn a_reservation_on_one_replica_counts_on_the_other_until_the_providers_next_report() {
    let (mut a, mut b, view) = two_replicas();
    assert_eq!(
        placed(&mut b.fleet, 1_000),
        [("big".into(), 4, 0), ("small".into(), 2, 0)]
    );

    // Two routers reserve on b: both land on `big` (4, then 3 free against 2).
    for _ in 0..2 {
        let answer = b.fleet.reserve(&PlacementQuery::new("m"), 1_010).unwrap();
        assert_eq!(answer.candidates[0].provider_id, "big");
    }
    // b tells a: a counts them too, and a router on a now goes to `small`.
    assert_eq!(tell(&mut b, &mut a.fleet), 1, "one provider's reservations");
    assert_eq!(a.fleet.placement_stats().reservations_elsewhere, 2);
    assert_eq!(placed(&mut a.fleet, 1_020), placed(&mut b.fleet, 1_020));
    assert_eq!(placed(&mut a.fleet, 1_020)[0], ("big".into(), 2, 2));
    let answer = a.fleet.reserve(&PlacementQuery::new("m"), 1_030).unwrap();
    assert_eq!(
        answer.candidates[0].provider_id, "big",
        "2 free, ahead of small's 2 by age"
    );
    // a's own reservation travels back to b: three on `big` everywhere.
    assert_eq!(tell(&mut a, &mut b.fleet), 1);
    for fleet in [&mut a.fleet, &mut b.fleet] {
        assert_eq!(
            placed(fleet, 1_040),
            [("small".into(), 2, 0), ("big".into(), 1, 3)]
        );
    }
    // Reservations told once are not told again, nor echoed by the replica that counted
    // them.
    assert_eq!(tell(&mut a, &mut b.fleet), 0);
    assert_eq!(tell(&mut b, &mut a.fleet), 0);

    // The Edge reports `big` with the three requests in flight: its report overwrites
    // the reservations on both replicas.
    let mut numbers = (*view).clone();
    let changed = numbers.apply(&[big(3)]).changed;
    a.fleet.handle_event(&load_view(
        "e1",
        1_100,
        LoadChange::Updated {
            view: Arc::new(numbers),
            changed,
        },
    ));
    tell(&mut a, &mut b.fleet);
    for fleet in [&mut a.fleet, &mut b.fleet] {
        assert_eq!(
            placed(fleet, 1_100),
            [("small".into(), 2, 0), ("big".into(), 1, 0)]
        );
    }
}

#[test]
fn a_report_that_crossed_a_reservation_on_the_way_leaves_it_counted() {
    let (mut a, mut b, view) = two_replicas();
    // The Edge reports `big` busy with one request to a at 1 005; before b hears of
    // it, a router reserves `big` on b at 1 010.
    let update = |view: &Arc<EdgeLoad>, in_flight: u32, at: u64| {
        let mut numbers = (**view).clone();
        let changed = numbers.apply(&[big(in_flight)]).changed;
        let view = Arc::new(numbers);
        let event = load_view(
            "e1",
            at,
            LoadChange::Updated {
                view: view.clone(),
                changed,
            },
        );
        (view, event)
    };
    let (busy, event) = update(&view, 1, 1_005);
    a.fleet.handle_event(&event);
    b.fleet.reserve(&PlacementQuery::new("m"), 1_010).unwrap();
    // The report reaches b: from before the reservation, it does not know of it.
    tell(&mut a, &mut b.fleet);
    assert_eq!(placed(&mut b.fleet, 1_020)[0], ("big".into(), 2, 1));
    // The Edge's next report (with the reserved request in flight) overwrites it.
    let (_, event) = update(&busy, 2, 1_100);
    a.fleet.handle_event(&event);
    tell(&mut a, &mut b.fleet);
    assert_eq!(placed(&mut b.fleet, 1_100)[0], ("big".into(), 2, 0));
}

#[test]
fn a_told_reservation_lapses_with_the_numbers_it_was_counted_on() {
    let (mut a, mut b, _) = two_replicas();
    b.fleet.reserve(&PlacementQuery::new("m"), 1_010).unwrap();
    tell(&mut b, &mut a.fleet);
    assert_eq!(placed(&mut a.fleet, 1_020)[0], ("big".into(), 3, 1));
    // No report of `big` comes: the reservation lapses on a when it does on b, a
    // staleness threshold after it was placed (whatever a heard meanwhile).
    let after = u64::try_from(a.fleet.staleness().pushed.as_millis()).unwrap();
    a.fleet
        .handle_event(&load_view("e1", 1_010 + after - 10, LoadChange::Confirmed));
    tell(&mut a, &mut b.fleet);
    let now = 1_010 + after;
    for fleet in [&mut a.fleet, &mut b.fleet] {
        assert_eq!(placed(fleet, now)[0], ("big".into(), 4, 0));
    }
}

/// `count` reservations (`long` long-context) on `provider_id` of node `n0` of
/// `edge_id`, made at 1 000.
fn told(edge_id: &str, provider_id: &str, count: u32, long: u32) -> LoadReservation {
    LoadReservation {
        edge_id: edge_id.into(),
        node_id: "n0".into(),
        provider_id: provider_id.into(),
        count,
        long_context: long,
        at_unix_ms: 1_000,
    }
}

#[test]
fn a_reservation_on_a_provider_the_receiver_does_not_hold_is_left_alone() {
    let (_, mut b, _) = two_replicas();
    let batch = LoadBatch {
        replica: "c".into(),
        epoch: 1,
        seq: 1,
        reservations: vec![
            told("e9", "big", 1, 0),
            told("e1", "gone", 1, 0),
            told("e1", "small", 0, 5),
        ],
        ..Default::default()
    };
    assert_eq!(b.fleet.apply_remote(&batch).reservations, 0);
    assert_eq!(
        placed(&mut b.fleet, 1_000),
        [("big".into(), 4, 0), ("small".into(), 2, 0)]
    );
    // A batch already applied carries nothing twice.
    let again = LoadBatch {
        reservations: vec![told("e1", "big", 1, 0)],
        ..batch
    };
    assert_eq!(b.fleet.apply_remote(&again).reservations, 0, "seq 1 again");
}

#[test]
fn reservations_waiting_to_be_told_are_bounded_by_providers_and_the_rest_counted() {
    let mut a = Publisher::new("a", 1);
    let edges = MAX_PENDING_RESERVATIONS + 10;
    for i in 0..edges {
        let id = format!("e{i:05}");
        a.fleet.handle_event(&accepted(&id, true));
        let view = common::view(&id, &[("eu", vec![p("big", "m", 1, 0, 0)])]);
        a.fleet
            .handle_event(&load_view(&id, 1_000, LoadChange::Replaced(view)));
    }
    // Each reservation fills one provider (capacity 1): the next goes elsewhere.
    for _ in 0..edges {
        assert!(
            a.fleet
                .reserve(&PlacementQuery::new("m"), 1_010)
                .unwrap()
                .reserved
        );
    }
    let told = a.fleet.take_load_reservations(usize::MAX);
    assert_eq!(told.len(), MAX_PENDING_RESERVATIONS);
    assert!(told.iter().all(|r| r.count == 1 && r.at_unix_ms == 1_010));
    assert_eq!(a.fleet.placement_stats().reservations_unshared, 10);
    // Taken in parts: none left.
    assert!(a.fleet.take_load_reservations(usize::MAX).is_empty());
}
