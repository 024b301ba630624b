//! The holder's rules one at a time, over an in-memory store whose operations the test
//! runs (or holds back, or fails) by hand.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_lite::future::block_on;
use iop_driver::iop_core::Instant;
use iop_driver::iop_core::cp::{Claim, ClaimAnswer, ConnectionId, DuplicatePolicy};

use super::*;
use crate::MemoryStore;
use crate::ownership::OwnershipStore;

/// The core's side: claims waiting, sessions live, what it was told.
#[derive(Default)]
struct FakeCore {
    waiting: BTreeMap<ConnectionId, String>,
    live: BTreeMap<String, u64>,
    answers: Vec<(ConnectionId, ClaimAnswer)>,
    lost: Vec<(String, u64)>,
}

impl Sessions for FakeCore {
    fn answer(&mut self, conn: ConnectionId, answer: ClaimAnswer) -> bool {
        self.answers.push((conn, answer));
        let Some(edge) = self.waiting.remove(&conn) else {
            return false;
        };
        if let ClaimAnswer::Granted { session_id } = answer {
            self.live.insert(edge, session_id);
        }
        true
    }
    fn lose(&mut self, edge_id: &str, session_id: u64, _by: u64) -> bool {
        self.lost.push((edge_id.to_owned(), session_id));
        self.live.get(edge_id) == Some(&session_id) && self.live.remove(edge_id).is_some()
    }
    fn live(&self, edge_id: &str, session_id: u64) -> bool {
        self.live.get(edge_id) == Some(&session_id)
    }
    fn waiting(&self, conn: ConnectionId) -> bool {
        self.waiting.contains_key(&conn)
    }
}

struct Rig {
    holder: Holder,
    store: MemoryStore,
    core: FakeCore,
    now: Instant,
    /// Operations asked for and not run yet.
    ops: Vec<(OpId, Op)>,
    other: Vec<Action>,
}

fn key(edge: &str) -> String {
    crate::key::edge_key(edge)
}

impl Rig {
    fn new() -> Self {
        let mut rig = Rig {
            holder: Holder::new("a", HolderConfig::default(), Arc::default(), Instant::ZERO),
            store: MemoryStore::new(),
            core: FakeCore::default(),
            now: Instant::ZERO,
            ops: Vec::new(),
            other: Vec::new(),
        };
        rig.collect();
        assert_eq!(
            rig.other,
            vec![Action::Watch],
            "the first action starts the watch"
        );
        rig.other.clear();
        rig
    }

    fn collect(&mut self) {
        while let Some(action) = self.holder.poll_action() {
            match action {
                Action::Run { id, op } => self.ops.push((id, op)),
                other => self.other.push(other),
            }
        }
    }

    fn execute(&self, op: &Op) -> OpResult {
        block_on(async {
            match op {
                Op::Read { edge_id, leader } => OpResult::Read(if *leader {
                    self.store.leader_entry(&key(edge_id)).await
                } else {
                    self.store.entry(&key(edge_id)).await
                }),
                Op::Write {
                    edge_id,
                    record,
                    expected,
                } => OpResult::Written(match expected {
                    None => self.store.create(&key(edge_id), record).await,
                    Some(r) => self.store.update(&key(edge_id), record, *r).await,
                }),
                Op::Alive { replica } => OpResult::Alive(self.store.replica_alive(replica).await),
            }
        })
    }

    /// Runs the oldest operation asked for against the store.
    fn step(&mut self) -> Op {
        let (id, op) = self.ops.remove(0);
        let result = self.execute(&op);
        self.holder.op_done(self.now, id, result, &mut self.core);
        self.collect();
        op
    }

    /// Runs operations until none is asked for (adoptions done at once).
    fn settle(&mut self) {
        for _ in 0..100 {
            let adopt: Vec<ClaimId> = self
                .other
                .iter()
                .filter_map(|a| match a {
                    Action::Adopt { claim, .. } => Some(*claim),
                    _ => None,
                })
                .collect();
            self.other.retain(|a| !matches!(a, Action::Adopt { .. }));
            for claim in adopt {
                self.holder.adopted(self.now, claim, &mut self.core);
                self.collect();
            }
            if self.ops.is_empty() {
                return;
            }
            self.step();
        }
        panic!("the holder never settles");
    }

    fn claim(&mut self, conn: u64, edge: &str) {
        let conn = ConnectionId(conn);
        self.core.waiting.insert(conn, edge.to_owned());
        let mut claim = Claim::new(conn, edge, DuplicatePolicy::Replace);
        claim.local_session_id = self.core.live.get(edge).copied();
        self.holder.claim(self.now, claim, &self.core);
        self.collect();
    }

    /// Another replica `by` takes `edge`'s record over, as its claim would.
    fn taken_by(&mut self, edge: &str, by: &str) -> u64 {
        let at = self.store.current(&key(edge)).map(|c| c.revision);
        self.store
            .write(&key(edge), &OwnerRecord::live(by), at)
            .unwrap()
    }

    fn watch(&mut self, edge: &str) {
        let c = self.store.current(&key(edge)).unwrap();
        self.holder
            .observed(self.now, edge, c.revision, c.record, &mut self.core);
        self.collect();
    }

    fn advance(&mut self, by: Duration) {
        self.now = self.now + by;
        self.holder.handle_timeout(self.now, &mut self.core);
        self.collect();
    }
}

#[test]
fn a_claim_is_granted_and_its_close_released() {
    let mut rig = Rig::new();
    rig.claim(1, "edge-1");
    // Nothing seen of the record: one create, no read.
    assert!(matches!(rig.ops[0].1, Op::Write { expected: None, .. }));
    rig.settle();
    let s = rig.store.current(&key("edge-1")).unwrap().revision;
    assert_eq!(rig.core.live.get("edge-1"), Some(&s));
    assert_eq!(rig.holder.session("edge-1"), Some(s));
    rig.holder.session_ended(rig.now, "edge-1", s);
    rig.collect();
    rig.settle();
    let c = rig.store.current(&key("edge-1")).unwrap();
    assert_eq!(c.record, Some(OwnerRecord::closed("a")));
    assert_eq!(rig.holder.session("edge-1"), None);
    assert_eq!(rig.holder.backlog(), (0, 0, 0));
}

#[test]
fn a_claim_whose_record_is_taken_while_it_is_pending_is_never_granted() {
    // Seen by the watch between the write and its acknowledgement.
    let mut rig = Rig::new();
    rig.claim(1, "edge-1");
    let (id, op) = rig.ops.remove(0);
    let written = rig.execute(&op);
    rig.taken_by("edge-1", "b");
    rig.watch("edge-1");
    rig.holder.op_done(rig.now, id, written, &mut rig.core);
    rig.collect();
    rig.settle();
    assert_eq!(
        rig.core.answers,
        vec![(ConnectionId(1), ClaimAnswer::Unavailable)]
    );
    assert!(rig.core.live.is_empty());
    assert_eq!(rig.holder.session("edge-1"), None);

    // Told by the winner between the write and the grant (while adopting commands).
    let mut rig = Rig::new();
    rig.store
        .write(&key("edge-2"), &OwnerRecord::closed("b"), None)
        .unwrap();
    rig.claim(2, "edge-2");
    rig.settle_ops_only();
    let Some(Action::Adopt { claim, .. }) = rig.other.pop() else {
        panic!(
            "a returning edge's commands are adopted first: {:?}",
            rig.other
        );
    };
    let ours = rig.store.current(&key("edge-2")).unwrap().revision;
    let theirs = rig.taken_by("edge-2", "b");
    let notice = Superseded {
        edge_id: "edge-2".into(),
        session_id: ours,
        by_session_id: theirs,
        by_replica: "b".into(),
    };
    rig.holder.told(rig.now, notice, &mut rig.core);
    rig.holder.adopted(rig.now, claim, &mut rig.core);
    assert_eq!(
        rig.core.answers,
        vec![(ConnectionId(2), ClaimAnswer::Unavailable)]
    );
    assert_eq!(rig.holder.stats.snapshot().claims_overtaken, 1);
}

impl Rig {
    fn settle_ops_only(&mut self) {
        while !self.ops.is_empty() {
            self.step();
        }
    }
}

#[test]
fn a_session_whose_record_moved_on_is_closed_but_not_for_a_claim_of_its_own() {
    let mut rig = Rig::new();
    rig.claim(1, "edge-1");
    rig.settle();
    let first = rig.holder.session("edge-1").unwrap();
    // The Edge reconnects here: this replica's own newer record, seen before the
    // claim is answered, is no loss.
    rig.claim(2, "edge-1");
    rig.step();
    rig.watch("edge-1");
    assert!(rig.core.lost.is_empty(), "{:?}", rig.core.lost);
    rig.settle();
    let second = rig.holder.session("edge-1").unwrap();
    assert!(second > first);
    // Another replica takes it: closed.
    rig.taken_by("edge-1", "b");
    rig.watch("edge-1");
    assert_eq!(rig.core.lost, vec![("edge-1".to_owned(), second)]);
    assert_eq!(rig.holder.session("edge-1"), None);
    assert_eq!(rig.holder.owner("edge-1").unwrap().0, "b");
}

#[test]
fn a_failed_release_is_retried_until_it_is_written() {
    let mut rig = Rig::new();
    rig.claim(1, "edge-1");
    rig.settle();
    let s = rig.holder.session("edge-1").unwrap();
    rig.core.live.clear();
    rig.holder.session_ended(rig.now, "edge-1", s);
    rig.collect();
    rig.store.set_down(true);
    rig.step();
    rig.advance(Duration::from_millis(100));
    assert!(rig.ops.is_empty(), "not before its backoff");
    rig.advance(Duration::from_millis(100));
    rig.step();
    rig.store.set_down(false);
    rig.advance(Duration::from_millis(400));
    rig.settle();
    let c = rig.store.current(&key("edge-1")).unwrap();
    assert_eq!(c.record, Some(OwnerRecord::closed("a")));
    assert_eq!(rig.holder.stats.snapshot().releases_failed, 2);
    assert_eq!(rig.holder.backlog().1, 0);
}

#[test]
fn a_write_whose_acknowledgement_was_lost_is_checked_and_released() {
    let mut rig = Rig::new();
    rig.claim(1, "edge-1");
    // Applied by the engine, reported as a timeout.
    let (id, op) = rig.ops.remove(0);
    let _ = rig.execute(&op);
    rig.holder.op_done(
        rig.now,
        id,
        OpResult::Written(Err(WriteError::Store(StoreError("timed out".into())))),
        &mut rig.core,
    );
    rig.collect();
    assert_eq!(
        rig.core.answers,
        vec![(ConnectionId(1), ClaimAnswer::Unavailable)]
    );
    assert!(matches!(rig.ops[0].1, Op::Read { leader: true, .. }));
    rig.settle();
    let c = rig.store.current(&key("edge-1")).unwrap();
    assert_eq!(c.record, Some(OwnerRecord::closed("a")));
    assert_eq!(rig.holder.stats.snapshot().phantoms_released, 1);
}

#[test]
fn records_left_live_by_an_earlier_run_are_released_as_the_watch_finds_them() {
    let mut rig = Rig::new();
    rig.store
        .write(&key("edge-9"), &OwnerRecord::live("a"), None)
        .unwrap();
    rig.watch("edge-9");
    rig.settle();
    let c = rig.store.current(&key("edge-9")).unwrap();
    assert_eq!(c.record, Some(OwnerRecord::closed("a")));
}

#[test]
fn the_reconcile_closes_moved_on_and_rolled_back_sessions_and_sweeps_lost_closes() {
    let mut rig = Rig::new();
    rig.store
        .write(&key("e-2"), &OwnerRecord::closed("b"), None)
        .unwrap();
    for (conn, edge) in [(1, "e-1"), (2, "e-2"), (3, "e-3")] {
        rig.claim(conn, edge);
    }
    rig.settle();
    // e-1: taken elsewhere, never seen by the watch; e-2: the store lost the
    // write that granted it (behind the session); e-3: its close never reported.
    rig.taken_by("e-1", "b");
    rig.store.rewind(&key("e-2"), 1);
    let s3 = rig.holder.session("e-3").unwrap();
    rig.core.live.remove("e-3");
    rig.advance(Duration::from_secs(30));
    assert!(
        rig.other.contains(&Action::Watch),
        "the fleet map is rebuilt"
    );
    rig.settle();
    assert_eq!(rig.holder.session("e-1"), None);
    assert_eq!(rig.holder.session("e-2"), None);
    assert_eq!(rig.holder.stats.snapshot().rollbacks, 1);
    let c = rig.store.current(&key("e-3")).unwrap();
    assert_eq!(
        (c.record, c.revision > s3),
        (Some(OwnerRecord::closed("a")), true)
    );
    assert_eq!(rig.holder.stats.snapshot().reconciles, 1);
}

#[test]
fn an_ended_watch_is_restarted_with_backoff_and_a_reconcile() {
    let mut rig = Rig::new();
    rig.advance(Duration::from_secs(10));
    rig.holder.watch_ended(rig.now);
    // It ran a while: restarted after the first backoff.
    assert_eq!(
        rig.holder.poll_timeout(),
        Some(rig.now + Duration::from_millis(200))
    );
    rig.advance(Duration::from_millis(200));
    assert_eq!(rig.other, vec![Action::Watch]);
    rig.other.clear();
    // Ending again at once: the wait doubles.
    rig.holder.watch_ended(rig.now);
    assert_eq!(
        rig.holder.poll_timeout(),
        Some(rig.now + Duration::from_millis(400))
    );
    let snapshot = rig.holder.stats.snapshot();
    assert_eq!((snapshot.watch_restarts, snapshot.reconciles), (2, 1));
}

#[test]
fn a_claim_is_refused_only_on_the_leaders_copy_of_its_record() {
    let mut rig = Rig::new();
    rig.store
        .write(&key("edge-1"), &OwnerRecord::live("b"), None)
        .unwrap();
    let at = rig.store.current(&key("edge-1")).unwrap().revision;
    rig.watch("edge-1");
    // b let it go; the watch and a follower behind its leader still say it is b's.
    rig.store
        .write(&key("edge-1"), &OwnerRecord::closed("b"), Some(at))
        .unwrap();
    rig.store.set_alive("b", true);
    let conn = ConnectionId(1);
    rig.core.waiting.insert(conn, "edge-1".into());
    rig.holder.claim(
        rig.now,
        Claim::new(conn, "edge-1", DuplicatePolicy::Reject),
        &rig.core,
    );
    rig.collect();
    let (id, op) = rig.ops.remove(0);
    assert!(matches!(op, Op::Read { leader: false, .. }), "{op:?}");
    let stale = Current {
        record: Some(OwnerRecord::live("b")),
        revision: at,
    };
    rig.holder
        .op_done(rig.now, id, OpResult::Read(Ok(Some(stale))), &mut rig.core);
    rig.collect();
    assert!(
        matches!(rig.ops[0].1, Op::Read { leader: true, .. }),
        "{:?}",
        rig.ops
    );
    rig.settle();
    let granted = rig
        .core
        .answers
        .iter()
        .any(|(c, a)| *c == conn && matches!(a, ClaimAnswer::Granted { .. }));
    assert!(granted, "{:?}", rig.core.answers);
}

#[test]
fn a_claim_taken_up_twice_is_decided_once() {
    // Its event, and the core's list of claims waiting (a replica that subscribed
    // late, or whose subscription lagged), both hand it over.
    let mut rig = Rig::new();
    rig.claim(1, "edge-1");
    let again = Claim::new(ConnectionId(1), "edge-1", DuplicatePolicy::Replace);
    rig.holder.claim(rig.now, again.clone(), &rig.core);
    rig.collect();
    assert_eq!(rig.ops.len(), 1, "one write: {:?}", rig.ops);
    rig.settle();
    let s = rig.store.current(&key("edge-1")).unwrap().revision;
    assert_eq!(rig.core.live.get("edge-1"), Some(&s));
    // Answered: its hello no longer waits, and a late copy of it writes nothing.
    rig.holder.claim(rig.now, again, &rig.core);
    rig.collect();
    assert!(rig.ops.is_empty(), "{:?}", rig.ops);
    assert_eq!(rig.core.answers.len(), 1, "{:?}", rig.core.answers);
    assert_eq!(rig.store.current(&key("edge-1")).unwrap().revision, s);
    assert_eq!(rig.holder.backlog(), (0, 0, 0));
}
