//! The write path against an engine double that fails each step in turn, or lands a
//! write after reporting it failed.

use std::time::Duration;

use bytes::Bytes;
use iop_driver::iop_core::cp::{CommandAnswer, CommandOutcome, CommandState, Ending, EndingKind};
use iop_driver::iop_core::proto::{CommandPhase, EdgeCommandRequest, Message};

use super::super::records::double::{Double, Step};
use super::super::records::{Put, cas_put};
use super::super::{index_key, record_key};
use super::{Finish, finish_orphan, finish_unrecorded};
use crate::stored::StoredCommand;

const EDGE: &str = "edge-1";

fn request(id: &str) -> EdgeCommandRequest {
    EdgeCommandRequest {
        command_id: id.into(),
        operation: "edge.ping".into(),
        ..Default::default()
    }
}

/// The write-ahead's record: the command about to be sent, never answered.
fn ahead(id: &str, session: u64) -> Bytes {
    StoredCommand::new(EDGE, session, CommandState::new(request(id)), None)
        .encode_to_vec()
        .into()
}

fn stored(engine: &Double, id: &str) -> Option<StoredCommand> {
    StoredCommand::decode_value(&engine.value(&record_key(EDGE, id))?)
}

fn unrecorded(engine: &Double, id: &str) -> bool {
    stored(engine, id).is_some_and(|s| {
        s.state()
            .outcome
            .as_ref()
            .and_then(|o| o.ending())
            .is_some_and(|e| e.kind() == EndingKind::Unrecorded)
    })
}

fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn a_refused_command_whose_record_landed_is_finished_unrecorded() {
    let engine = Double::default();
    engine.put(&record_key(EDGE, "c1"), ahead("c1", 7));
    assert_eq!(
        block(finish_unrecorded(&engine, EDGE, &request("c1"), 7)),
        Finish::Done
    );
    assert!(unrecorded(&engine, "c1"));
    assert!(stored(&engine, "c1").unwrap().finished());
}

#[test]
fn a_refused_command_whose_record_did_not_land_cannot_be_created_by_a_late_write() {
    let engine = Double::default();
    // The write-ahead's create is reported failed and lands later.
    engine.script(&[Step::Late]);
    let key = record_key(EDGE, "c1");
    let put = block(cas_put(&engine, &key, ahead("c1", 7), None, |_| false));
    // It read back nothing (not landed yet), then gave up.
    assert_eq!(put, Put::Failed);
    assert_eq!(
        block(finish_unrecorded(&engine, EDGE, &request("c1"), 7)),
        Finish::Done
    );
    assert!(unrecorded(&engine, "c1"), "written anew, finished");
    engine.land();
    assert!(
        unrecorded(&engine, "c1"),
        "the late create finds it and lands nothing"
    );
}

#[test]
fn a_late_update_cannot_reopen_a_finished_record() {
    let engine = Double::default();
    let key = record_key(EDGE, "c1");
    engine.put(&key, ahead("c1", 7));
    let revision = 1;
    // A write-ahead over that record (a caller's retry) lands after its writer left.
    engine.script(&[Step::Late, Step::Fail]);
    let put = block(cas_put(
        &engine,
        &key,
        ahead("c1", 7),
        Some(revision),
        |_| false,
    ));
    assert_eq!(put, Put::Failed);
    block(finish_unrecorded(&engine, EDGE, &request("c1"), 7));
    engine.land();
    assert!(unrecorded(&engine, "c1"));
}

#[test]
fn each_step_failing_in_turn_is_retried_until_the_record_is_finished() {
    // The read, then the write, fail; each round is tried again by the writer.
    for steps in [
        vec![Step::Fail],
        vec![Step::Ok, Step::Fail],
        vec![Step::Ok, Step::Late],
    ] {
        let engine = Double::default();
        engine.put(&record_key(EDGE, "c1"), ahead("c1", 7));
        engine.script(&steps);
        let mut rounds = 0;
        while block(finish_unrecorded(&engine, EDGE, &request("c1"), 7)) == Finish::Retry {
            rounds += 1;
            engine.land();
            assert!(rounds < 5, "{steps:?}: {:?}", engine.log());
        }
        engine.land();
        assert!(unrecorded(&engine, "c1"), "{steps:?}: {:?}", engine.log());
    }
}

#[test]
fn a_record_some_replica_answered_finished_or_took_over_is_left_as_it_is() {
    let engine = Double::default();
    // Answered: the command was sent after all (a caller's retry through the holder).
    let mut answered = CommandState::new(request("c1"));
    answered.answer = iop_driver::iop_core::cp::CommandAnswer::Accepted;
    let value: Bytes = StoredCommand::new(EDGE, 7, answered, None)
        .encode_to_vec()
        .into();
    engine.put(&record_key(EDGE, "c1"), value.clone());
    block(finish_unrecorded(&engine, EDGE, &request("c1"), 7));
    assert_eq!(engine.value(&record_key(EDGE, "c1")), Some(value));
    // A newer session's (a replica that took the Edge over and carries it on).
    engine.put(&record_key(EDGE, "c2"), ahead("c2", 9));
    block(finish_unrecorded(&engine, EDGE, &request("c2"), 7));
    assert!(!unrecorded(&engine, "c2"));
    // Another command under the id.
    let mut other = request("c3");
    other.operation = "node.drain".into();
    engine.put(&record_key(EDGE, "c3"), ahead("c3", 7));
    block(finish_unrecorded(&engine, EDGE, &other, 7));
    assert!(!unrecorded(&engine, "c3"));
}

#[test]
fn an_orphan_is_finished_and_a_listed_or_young_record_is_not() {
    let mut engine = Double::default();
    engine.age = Duration::from_secs(60);
    let min_age = Duration::from_secs(30);
    engine.put(&record_key(EDGE, "orphan"), ahead("orphan", 7));
    engine.put(&record_key(EDGE, "listed"), ahead("listed", 7));
    engine.put(&index_key(EDGE), Bytes::from_static(b"7\nlisted"));
    let found = block(finish_orphan(&engine, EDGE, "orphan", min_age)).unwrap();
    assert!(found.finished());
    assert!(unrecorded(&engine, "orphan"));
    let kept = block(finish_orphan(&engine, EDGE, "listed", min_age)).unwrap();
    assert!(!kept.finished(), "the next holder carries it on");
    // Younger than a write-ahead can take: its index may be landing.
    engine.put(&record_key(EDGE, "young"), ahead("young", 7));
    engine.age = Duration::from_secs(1);
    let young = block(finish_orphan(&engine, EDGE, "young", min_age)).unwrap();
    assert!(!young.finished());
}

/// A record of `id` at `session` with `outcome`, answered (the Edge took it).
fn ended(id: &str, session: u64, outcome: Option<CommandOutcome>) -> StoredCommand {
    let mut state = CommandState::new(request(id));
    state.answer = CommandAnswer::Accepted;
    state.outcome = outcome;
    StoredCommand::new(EDGE, session, state, None)
}

/// The record write as the writer makes it: a compare-and-set that gives way to what
/// stands over it.
fn write_record(engine: &Double, write: &StoredCommand, expected: Option<u64>) -> Put {
    let key = record_key(EDGE, &write.request.as_ref().unwrap().command_id);
    let value: Bytes = write.encode_to_vec().into();
    block(cas_put(engine, &key, value, expected, |v| {
        StoredCommand::decode_value(v).is_some_and(|there| there.stands_over(write))
    }))
}

#[test]
fn a_commands_first_ending_stands_over_a_newer_sessions_other_ending() {
    let engine = Double::default();
    let key = record_key(EDGE, "c1");
    // Session 210 sent the command (revision 1); the replica that took the Edge over
    // in session 211 adopted it at that revision.
    engine.put(&key, ahead("c1", 210));
    let adopted_at = Some(1);
    // The Edge's SUCCEEDED lands through session 210's replica (its caller is told)...
    let succeeded = ended(
        "c1",
        210,
        Some(CommandOutcome::Finished(CommandPhase::Succeeded)),
    );
    assert_eq!(write_record(&engine, &succeeded, Some(1)), Put::Written(2));
    // ...then the newer session's LOST (its Edge came back without the command), and
    // its write of the command still running: neither reopens nor rewrites the end.
    let lost = ended("c1", 211, Some(CommandOutcome::Ended(Ending::Lost)));
    assert_eq!(write_record(&engine, &lost, adopted_at), Put::Stands);
    let running = ended("c1", 211, None);
    assert_eq!(write_record(&engine, &running, adopted_at), Put::Stands);
    assert_eq!(stored(&engine, "c1"), Some(succeeded.clone()));
    // The same end written again (a caller's flush after its note) is no conflict.
    assert_eq!(write_record(&engine, &succeeded, None), Put::Written(3));

    // The other order: LOST landed first, the older session's SUCCEEDED gives way.
    engine.put(&record_key(EDGE, "c2"), ahead("c2", 210));
    let lost = ended("c2", 211, Some(CommandOutcome::Ended(Ending::Lost)));
    assert!(matches!(
        write_record(&engine, &lost, Some(4)),
        Put::Written(_)
    ));
    let succeeded = ended(
        "c2",
        210,
        Some(CommandOutcome::Finished(CommandPhase::Succeeded)),
    );
    assert_eq!(write_record(&engine, &succeeded, Some(4)), Put::Stands);
    assert_eq!(stored(&engine, "c2"), Some(lost));

    // An UNRECORDED end (never sent) yields to a caller's retry written ahead anew.
    let unsent = StoredCommand::unrecorded(EDGE, 210, request("c3"));
    engine.put(&record_key(EDGE, "c3"), unsent.encode_to_vec().into());
    let retried = StoredCommand::new(EDGE, 211, CommandState::new(request("c3")), None);
    assert!(matches!(
        write_record(&engine, &retried, None),
        Put::Written(_)
    ));
    assert_eq!(stored(&engine, "c3"), Some(retried));
}
