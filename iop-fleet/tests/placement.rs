//! Placement over the fleet's per-model index: ranking, the reasons a provider is left
//! out, staleness by how each Edge reports, reservations, and (a property test) the
//! index against a scan of every view for any sequence of views, updates, heartbeats,
//! disconnections, departures and moves to another Control Plane.

mod common;

use std::sync::Arc;

use common::{P, accepted, load_view, p, view};
use iop_core::cp::CpEvent;
use iop_core::cp::load::{EdgeLoad, LoadChange};
use iop_fleet::{Fleet, FleetConfig, Pick, PlacementQuery};
use proptest::prelude::*;

fn fleet() -> Fleet {
    Fleet::new(FleetConfig::default()).unwrap()
}

fn ids(a: &iop_fleet::PlacementAnswer) -> Vec<String> {
    a.candidates
        .iter()
        .map(|c| format!("{}/{}/{}", c.edge_id, c.node_id, c.provider_id))
        .collect()
}

const T0: u64 = 1_700_000_000_000;

#[test]
fn candidates_rank_by_free_slots_then_queue_and_the_rest_say_why_not() {
    let mut f = fleet();
    f.handle_event(&accepted("a", true));
    f.handle_event(&accepted("b", true));
    let mut off = p("off", "m", 4, 0, 0);
    off.online = false;
    let mut drained = p("drained", "m", 4, 0, 0);
    drained.eligible = false;
    let a = view(
        "a",
        &[
            (
                "eu",
                vec![p("two-free", "m", 4, 2, 0), p("full", "m", 2, 2, 5)],
            ),
            ("us", vec![off, p("other-model", "x", 8, 0, 0)]),
        ],
    );
    let b = view(
        "b",
        &[(
            "eu",
            vec![
                p("three-free", "m", 3, 0, 1),
                p("two-free-queued", "m", 2, 0, 3),
                drained,
            ],
        )],
    );
    f.handle_event(&load_view("a", T0, LoadChange::Replaced(a)));
    f.handle_event(&load_view("b", T0 + 10, LoadChange::Replaced(b)));

    let answer = f.placement(&PlacementQuery::new("m"), T0 + 20).unwrap();
    assert_eq!(
        ids(&answer),
        ["b/n0/three-free", "a/n0/two-free", "b/n0/two-free-queued"]
    );
    let first = &answer.candidates[0];
    assert_eq!(
        (first.capacity, first.in_flight, first.queued, first.free),
        (3, 0, 1, 3)
    );
    assert_eq!(first.age_ms, 10);
    assert_eq!(answer.serving, 6);
    let e = answer.excluded;
    assert_eq!(
        (e.not_serving, e.offline, e.full, e.not_eligible, e.stale),
        (1, 1, 1, 1, 0)
    );

    // A limit, and a label.
    let mut q = PlacementQuery::new("m");
    q.limit = 1;
    assert_eq!(ids(&f.placement(&q, T0 + 20).unwrap()), ["b/n0/three-free"]);
    q.limit = 10;
    q.labels = vec![("zone".into(), "us".into())];
    let answer = f.placement(&q, T0 + 20).unwrap();
    assert!(answer.candidates.is_empty());
    assert_eq!(answer.excluded.labels, 3);

    // A model nobody serves: every provider counted as not serving it.
    let answer = f.placement(&PlacementQuery::new("nope"), T0 + 20).unwrap();
    assert!(answer.candidates.is_empty());
    assert_eq!((answer.serving, answer.excluded.not_serving), (0, 7));

    // Bad queries are refused, typed.
    let mut q = PlacementQuery::new("m");
    q.limit = 0;
    assert_eq!(
        f.placement(&q, T0).unwrap_err(),
        iop_fleet::PlacementError::Limit
    );
    assert_eq!(
        f.placement(&PlacementQuery::new(""), T0)
            .unwrap_err()
            .code(),
        "bad_model"
    );
    let stats = f.placement_stats();
    assert_eq!((stats.placements, stats.empty), (4, 2));
}

#[test]
fn long_context_requests_need_room_in_both_pools() {
    let mut f = fleet();
    f.handle_event(&accepted("a", true));
    let mut lc_full = p("lc-full", "m", 8, 1, 0);
    lc_full.numbers[3..].copy_from_slice(&[2, 2, 0]);
    let mut lc_room = p("lc-room", "m", 4, 2, 0);
    lc_room.numbers[3..].copy_from_slice(&[2, 0, 1]);
    let a = view(
        "a",
        &[("eu", vec![lc_full, lc_room, p("none", "m", 4, 0, 0)])],
    );
    f.handle_event(&load_view("a", T0, LoadChange::Replaced(a)));
    let mut q = PlacementQuery::new("m");
    q.long_context = true;
    let answer = f.placement(&q, T0).unwrap();
    assert_eq!(ids(&answer), ["a/n0/lc-room"]);
    assert_eq!(answer.candidates[0].free, 2);
    assert_eq!(answer.excluded.full, 2);
    // Any request: ranked by the whole pool.
    let answer = f.placement(&PlacementQuery::new("m"), T0).unwrap();
    assert_eq!(ids(&answer), ["a/n0/lc-full", "a/n0/none", "a/n0/lc-room"]);
}

#[test]
fn numbers_go_stale_by_how_their_edge_reports_and_a_pushers_heartbeat_renews_them() {
    let mut f = fleet();
    let s = f.staleness();
    let (push_ms, pull_ms) = (s.pushed.as_millis() as u64, s.pulled.as_millis() as u64);
    assert!(push_ms < pull_ms);
    f.handle_event(&accepted("pushes", true));
    f.handle_event(&accepted("pulled", false));
    let pushes = view("pushes", &[("eu", vec![p("a", "m", 4, 0, 0)])]);
    let pulled = view("pulled", &[("eu", vec![p("b", "m", 2, 0, 0)])]);
    f.handle_event(&load_view("pushes", T0, LoadChange::Replaced(pushes)));
    f.handle_event(&load_view("pulled", T0, LoadChange::Replaced(pulled)));

    let q = PlacementQuery::new("m");
    assert_eq!(f.placement(&q, T0 + push_ms).unwrap().candidates.len(), 2);
    // Past the pushing Edge's threshold: left out, counted, never taken for idle.
    let answer = f.placement(&q, T0 + push_ms + 1).unwrap();
    assert_eq!(ids(&answer), ["pulled/n0/b"]);
    assert_eq!(answer.excluded.stale, 1);
    // Listed last and marked when asked for.
    let mut with_stale = q.clone();
    with_stale.include_stale = true;
    let answer = f.placement(&with_stale, T0 + push_ms + 1).unwrap();
    assert_eq!(ids(&answer), ["pulled/n0/b", "pushes/n0/a"]);
    assert!(answer.candidates[1].stale && !answer.candidates[0].stale);
    assert_eq!(answer.candidates[1].age_ms, push_ms + 1);
    // A heartbeat of the pushing Edge proves its numbers current again.
    f.handle_event(&load_view("pushes", T0 + push_ms, LoadChange::Confirmed));
    let answer = f.placement(&q, T0 + pull_ms + 1).unwrap();
    assert_eq!(ids(&answer), ["pushes/n0/a"]);
    assert_eq!(answer.excluded.stale, 1);
    assert!(f.placement_stats().stale_excluded >= 2);
}

/// A fleet of one Edge that pushes, "a", with providers "big" (3 free slots) and
/// "small" (2) of model "m".
fn big_and_small() -> Fleet {
    let mut f = fleet();
    f.handle_event(&accepted("a", true));
    let v = view(
        "a",
        &[("eu", vec![p("big", "m", 3, 0, 0), p("small", "m", 2, 0, 0)])],
    );
    f.handle_event(&load_view("a", T0, LoadChange::Replaced(v)));
    f
}

#[test]
fn a_reservation_counts_until_the_next_report_of_its_provider_or_until_it_lapses() {
    let mut f = big_and_small();
    let q = PlacementQuery::new("m");
    // Four routers at once: each pick counts, so they spread by free slots (3 against
    // 2, then 2 against 2 broken by position, 1 against 2, 1 against 1).
    let picks: Vec<(String, u32)> = (0..4)
        .map(|_| {
            let a = f.reserve(&q, T0).unwrap();
            assert!(a.reserved);
            let c = &a.candidates[0];
            (c.provider_id.clone(), c.reserved)
        })
        .collect();
    let expected = [("big", 1), ("big", 2), ("small", 1), ("big", 3)];
    assert_eq!(picks, expected.map(|(p, n)| (p.to_owned(), n)).to_vec());
    let answer = f.placement(&q, T0).unwrap();
    assert_eq!(answer.candidates.iter().map(|c| c.free).sum::<u32>(), 1);
    // All five slots taken: the fifth router finds none, told they are full.
    f.reserve(&q, T0).unwrap();
    let answer = f.reserve(&q, T0).unwrap();
    assert!(answer.candidates.is_empty() && !answer.reserved);
    assert_eq!(answer.excluded.full, 2);

    // The Edge reports "big" (its requests arrived): its reservations are overwritten.
    let updated = view(
        "a",
        &[("eu", vec![p("big", "m", 3, 3, 0), p("small", "m", 2, 0, 0)])],
    );
    f.handle_event(&load_view(
        "a",
        T0 + 100,
        LoadChange::Updated {
            view: updated,
            changed: vec![0],
        },
    ));
    let answer = f.placement(&q, T0 + 100).unwrap();
    assert!(
        answer.candidates.is_empty(),
        "big is full, small still reserved twice"
    );
    // "small" never reported its two: they lapse when its numbers would be stale.
    let lapse = f.staleness().pushed.as_millis() as u64;
    f.handle_event(&load_view("a", T0 + lapse, LoadChange::Confirmed));
    let answer = f.placement(&q, T0 + lapse + 1).unwrap();
    assert_eq!(ids(&answer), ["a/n0/small"]);
    assert_eq!(
        (answer.candidates[0].free, answer.candidates[0].reserved),
        (2, 0)
    );
}

#[test]
fn a_spread_pick_reserves_the_provider_it_draws_and_lists_it_first() {
    let mut f = big_and_small();
    // Five free slots, big's three first: the top of the draw falls on small, drawn
    // among every current candidate whatever the limit.
    let mut q = PlacementQuery::new("m");
    q.pick = Pick::Spread { random: u64::MAX };
    q.limit = 1;
    let a = f.reserve(&q, T0).unwrap();
    assert!(a.reserved);
    assert_eq!(ids(&a), ["a/n0/small"]);
    assert_eq!((a.candidates[0].reserved, a.candidates[0].free), (1, 1));
    // With room for both, the drawn one first, then the best other.
    q.limit = 2;
    let a = f.reserve(&q, T0).unwrap();
    assert_eq!(ids(&a), ["a/n0/small", "a/n0/big"]);
    assert_eq!(a.candidates[0].reserved, 2);
    // Counted like any reservation; a placement that does not reserve lists in rank
    // order whatever the pick.
    let listed = f.placement(&q, T0).unwrap();
    assert_eq!(ids(&listed), ["a/n0/big"]);
    assert_eq!(listed.excluded.full, 1);
    // The bottom of the draw falls on big.
    q.pick = Pick::Spread { random: 0 };
    let a = f.reserve(&q, T0).unwrap();
    assert_eq!(ids(&a), ["a/n0/big"]);
    assert_eq!(a.candidates[0].reserved, 1);
    assert_eq!(f.placement_stats().reservations, 3);
}

#[test]
fn a_disconnected_edge_counts_offline_and_a_departed_one_not_at_all() {
    let mut f = fleet();
    f.handle_event(&accepted("a", false));
    let v = view("a", &[("eu", vec![p("x", "m", 3, 0, 0)])]);
    f.handle_event(&load_view("a", T0, LoadChange::Replaced(v.clone())));
    f.handle_event(&CpEvent::EdgeDisconnected {
        edge_id: "a".into(),
        session_id: 1,
        reason: iop_core::cp::CloseReason::TransportClosed,
    });
    let q = PlacementQuery::new("m");
    let answer = f.placement(&q, T0).unwrap();
    assert!(answer.candidates.is_empty());
    assert_eq!((answer.serving, answer.excluded.offline), (1, 1));
    // Back on a new session: a candidate again from its first view.
    f.handle_event(&accepted("a", true));
    assert!(f.placement(&q, T0).unwrap().candidates.is_empty());
    f.handle_event(&load_view("a", T0 + 5, LoadChange::Replaced(v)));
    assert_eq!(f.placement(&q, T0 + 5).unwrap().candidates.len(), 1);
    f.handle_event(&CpEvent::EdgeForgotten {
        edge_id: "a".into(),
        reason: iop_core::cp::ForgetReason::Expired,
        unfinished_commands: Vec::new(),
    });
    let answer = f.placement(&q, T0 + 5).unwrap();
    assert_eq!((answer.serving, answer.excluded.not_serving), (0, 0));
}

/// What the property test does to the fleet.
#[derive(Debug, Clone)]
enum Op {
    Accept(usize, bool),
    /// A new view: per node, its providers.
    Replace(usize, Vec<Vec<P>>),
    /// New numbers for some providers of the current view: (index, numbers seed).
    Update(usize, Vec<(usize, [u32; 3], bool)>),
    Confirm(usize),
    Disconnect(usize),
    Forget(usize),
    /// Live on another Control Plane now: it counts for nothing here, but its view is
    /// kept (so its placement slot may be reused while it is away).
    Elsewhere(usize),
    Advance(u64),
}

const EDGES: usize = 3;
const MODELS: [&str; 2] = ["m", "x"];

fn provider_strategy(i: usize) -> impl Strategy<Value = P> {
    (
        prop::collection::vec(0..MODELS.len(), 0..3),
        0u32..4,
        0u32..5,
        0u32..3,
        prop::bool::weighted(0.85),
        prop::bool::weighted(0.85),
    )
        .prop_map(
            move |(models, capacity, in_flight, queued, online, eligible)| P {
                id: format!("p{i}"),
                models: models.into_iter().map(|m| MODELS[m].to_owned()).collect(),
                numbers: [capacity, in_flight.min(capacity), queued, 0, 0, 0],
                online,
                eligible,
            },
        )
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let edge = 0..EDGES;
    let nodes = prop::collection::vec(
        (0..3usize).prop_flat_map(|n| (0..n).map(provider_strategy).collect::<Vec<_>>()),
        1..3,
    );
    prop_oneof![
        1 => (edge.clone(), any::<bool>()).prop_map(|(e, p)| Op::Accept(e, p)),
        3 => (edge.clone(), nodes).prop_map(|(e, n)| Op::Replace(e, n)),
        3 => (
            edge.clone(),
            prop::collection::vec((0..4usize, [0u32..4, 0u32..5, 0u32..3], any::<bool>()), 1..3)
        )
            .prop_map(|(e, c)| Op::Update(e, c)),
        2 => edge.clone().prop_map(Op::Confirm),
        1 => edge.clone().prop_map(Op::Disconnect),
        1 => edge.clone().prop_map(Op::Forget),
        1 => edge.prop_map(Op::Elsewhere),
        3 => (0u64..8_000).prop_map(Op::Advance),
    ]
}

/// What the oracle knows of one Edge.
#[derive(Debug, Clone, Default)]
struct Known {
    present: bool,
    live: bool,
    pushes: bool,
    pending: Option<bool>,
    nodes: Vec<Vec<P>>,
    reported: Vec<u64>,
    proved: u64,
}

impl Known {
    fn providers(&self) -> impl Iterator<Item = &P> {
        self.nodes.iter().flatten()
    }
}

fn edge_name(e: usize) -> String {
    format!("edge-{e}")
}

fn edge_view(e: usize, nodes: &[Vec<P>]) -> Arc<EdgeLoad> {
    let nodes: Vec<(&str, Vec<P>)> = nodes.iter().map(|n| ("eu", n.clone())).collect();
    view(&edge_name(e), &nodes)
}

/// A candidate as the scan finds it: (free, queued, reported, edge, provider).
type Scanned = (u32, u32, u64, String, String);

/// The answer a scan of every Edge gives: sorted candidates (free, queued, reported,
/// edge, provider) and (serving, not serving, offline, full, not eligible, stale).
fn scan(
    known: &[Known],
    model: &str,
    now: u64,
    s: iop_fleet::Staleness,
) -> (Vec<Scanned>, [u64; 6]) {
    let mut out = Vec::new();
    let mut n = [0u64; 6];
    for (e, k) in known.iter().enumerate().filter(|(_, k)| k.present) {
        let after = if k.pushes { s.pushed } else { s.pulled }.as_millis() as u64;
        let stale = k.proved + after < now;
        for (i, p) in k.providers().enumerate() {
            if !p.models.iter().any(|m| m == model) {
                n[1] += 1;
                continue;
            }
            n[0] += 1;
            let [capacity, in_flight, queued, ..] = p.numbers;
            let free = capacity - in_flight;
            if !k.live || !p.online {
                n[2] += 1;
            } else if free == 0 {
                n[3] += 1;
            } else if !p.eligible {
                n[4] += 1;
            } else if stale {
                n[5] += 1;
            } else {
                out.push((free, queued, k.reported[i], edge_name(e), p.id.clone()));
            }
        }
    }
    out.sort_by(|a, b| (b.0, a.1, b.2, &a.3, &a.4).cmp(&(a.0, b.1, a.2, &b.3, &b.4)));
    (out, n)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn the_index_answers_as_a_scan_of_every_view(ops in prop::collection::vec(op_strategy(), 1..40)) {
        let mut f = fleet();
        let s = f.staleness();
        let mut known = vec![Known::default(); EDGES];
        let mut now = T0;
        for op in ops {
            match op {
                Op::Accept(e, pushes) => {
                    known[e].pending = Some(pushes);
                    f.handle_event(&accepted(&edge_name(e), pushes));
                }
                Op::Replace(e, nodes) => {
                    let k = &mut known[e];
                    if let Some(p) = k.pending.take() {
                        k.pushes = p;
                    }
                    k.present = true;
                    k.live = true;
                    k.reported = vec![now; nodes.iter().flatten().count()];
                    k.proved = k.proved.max(now);
                    k.nodes = nodes;
                    let v = edge_view(e, &k.nodes);
                    f.handle_event(&load_view(&edge_name(e), now, LoadChange::Replaced(v)));
                }
                Op::Update(e, changes) => {
                    let k = &mut known[e];
                    let count = k.providers().count();
                    if !k.live || count == 0 {
                        continue;
                    }
                    let mut changed = Vec::new();
                    let mut flat: Vec<&mut P> = k.nodes.iter_mut().flatten().collect();
                    for (i, [capacity, in_flight, queued], eligible) in changes {
                        let i = i % count;
                        let p = &mut flat[i];
                        p.numbers[..3].copy_from_slice(&[capacity, in_flight.min(capacity), queued]);
                        p.eligible = eligible;
                        if !changed.contains(&(i as u32)) {
                            changed.push(i as u32);
                        }
                    }
                    for &i in &changed {
                        k.reported[i as usize] = now;
                    }
                    if let Some(p) = k.pending.take() {
                        k.pushes = p;
                    }
                    k.proved = k.proved.max(now);
                    let v = edge_view(e, &k.nodes);
                    f.handle_event(&load_view(&edge_name(e), now, LoadChange::Updated { view: v, changed }));
                }
                Op::Confirm(e) => {
                    if known[e].live {
                        known[e].proved = known[e].proved.max(now);
                    }
                    f.handle_event(&load_view(&edge_name(e), now, LoadChange::Confirmed));
                }
                Op::Disconnect(e) => {
                    known[e].live = false;
                    known[e].pending = None;
                    f.handle_event(&CpEvent::EdgeDisconnected {
                        edge_id: edge_name(e),
                        session_id: 1,
                        reason: iop_core::cp::CloseReason::TransportClosed,
                    });
                }
                Op::Forget(e) => {
                    known[e] = Known::default();
                    f.handle_event(&CpEvent::EdgeForgotten {
                        edge_id: edge_name(e),
                        reason: iop_core::cp::ForgetReason::Asked,
                        unfinished_commands: Vec::new(),
                    });
                }
                Op::Elsewhere(e) => {
                    known[e] = Known::default();
                    f.handle_event(&CpEvent::EdgeSuperseded {
                        edge_id: edge_name(e),
                        old_session_id: 1,
                        new_session_id: 2,
                        old_instance_id: None,
                        new_instance_id: None,
                        total_supersessions: 1,
                        flapping: false,
                        elsewhere: true,
                    });
                }
                Op::Advance(ms) => now += ms,
            }
            for model in MODELS {
                let (expected, n) = scan(&known, model, now, s);
                let mut q = PlacementQuery::new(model);
                q.limit = 1000;
                let a = f.placement(&q, now).unwrap();
                let e = a.excluded;
                prop_assert_eq!(
                    [a.serving, e.not_serving, e.offline, e.full, e.not_eligible, e.stale],
                    n
                );
                // Ranked: free slots down, then queue up, then newest report first.
                let keys: Vec<(std::cmp::Reverse<u32>, u32, std::cmp::Reverse<u64>)> = a
                    .candidates
                    .iter()
                    .map(|c| (std::cmp::Reverse(c.free), c.queued, std::cmp::Reverse(now - c.age_ms.min(now))))
                    .collect();
                prop_assert!(keys.windows(2).all(|w| w[0].0 <= w[1].0 && (w[0].0 != w[1].0 || w[0].1 <= w[1].1)));
                let mut got: Vec<(u32, u32, String, String)> = a
                    .candidates
                    .iter()
                    .map(|c| (c.free, c.queued, c.edge_id.to_string(), c.provider_id.clone()))
                    .collect();
                got.sort();
                let mut want: Vec<(u32, u32, String, String)> =
                    expected.into_iter().map(|(f, q, _, e, p)| (f, q, e, p)).collect();
                want.sort();
                prop_assert_eq!(got, want);
            }
        }
    }
}

#[test]
fn a_departed_edges_reservation_never_lapses_anothers() {
    let mut f = fleet();
    let q = PlacementQuery::new("m");
    let lapse = f.staleness().pushed.as_millis() as u64;
    f.handle_event(&accepted("a", true));
    let a = view("a", &[("eu", vec![p("x", "m", 2, 0, 0)])]);
    f.handle_event(&load_view("a", T0, LoadChange::Replaced(a)));
    assert!(f.reserve(&q, T0).unwrap().reserved);
    f.handle_event(&CpEvent::EdgeForgotten {
        edge_id: "a".into(),
        reason: iop_core::cp::ForgetReason::Asked,
        unfinished_commands: Vec::new(),
    });
    // "b" takes the place "a" left, and reserves a second later.
    f.handle_event(&accepted("b", true));
    let b = view("b", &[("eu", vec![p("y", "m", 2, 0, 0)])]);
    f.handle_event(&load_view("b", T0 + 1_000, LoadChange::Replaced(b)));
    f.handle_event(&load_view("b", T0 + lapse, LoadChange::Confirmed));
    assert!(f.reserve(&q, T0 + 1_000).unwrap().reserved);
    // When "a"'s reservation would have lapsed, "b"'s still counts.
    let answer = f.placement(&q, T0 + lapse + 10).unwrap();
    assert_eq!(
        (answer.candidates[0].free, answer.candidates[0].reserved),
        (1, 1)
    );
}
