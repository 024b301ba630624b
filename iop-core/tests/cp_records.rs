//! Each command has one record, kept with it in its Edge's command book: the Edge's
//! response and events as they came and the endings without its word, read through
//! the Control Plane (`command_record`, `command_update`) and bounded across it
//! (`CpConfig::command_records`).

use iop_core::cp::{
    CommandOutcome, CommandRecord, CommandSpec, CommandUpdate, CpConfig, Ending, EnrolmentPolicy,
    UpdatePoll,
};
use iop_core::proto::{CommandPhase, EdgeCommandEvent, EdgeCommandResponse};
use iop_core::testing::scripted::edges::*;

const EDGE: &str = "edge-1";

fn send(t: &mut Pair, id: &str) {
    t.cp.send_command(t.now, EDGE, CommandSpec::new("op").with_id(id))
        .unwrap();
}

/// Every update of `command_id` from `cursor` until the record says nothing is new.
fn read(t: &Pair, command_id: &str, cursor: &mut u64) -> (Vec<CommandUpdate>, UpdatePoll) {
    let mut updates = Vec::new();
    loop {
        match t.cp.command_update(EDGE, command_id, cursor) {
            UpdatePoll::Update(u) => updates.push(u),
            end => return (updates, end),
        }
    }
}

fn phases(record: &CommandRecord) -> Vec<(u32, CommandPhase)> {
    record.events().map(|e| (e.sequence, e.phase())).collect()
}

#[test]
fn the_record_is_the_responses_and_events_as_they_came_read_once_from_a_cursor() {
    let mut t = harness();
    let (conn, _) = t.enrol(EDGE, &["op"]);
    send(&mut t, "c1");
    let mut cursor = 0;
    assert_eq!(read(&t, "c1", &mut cursor), (vec![], UpdatePoll::Pending));
    t.send(conn, cmd_response("c1", true));
    t.send(conn, cmd_event("c1", CommandPhase::Accepted, 1));
    let (updates, end) = read(&t, "c1", &mut cursor);
    assert_eq!(end, UpdatePoll::Pending, "not finished");
    assert!(
        matches!(&updates[..], [CommandUpdate::Response(r), CommandUpdate::Event(e)]
        if r.accepted && e.sequence == 1)
    );
    // A repeated event is not a new update; the terminal one ends the reading.
    t.send(conn, cmd_event("c1", CommandPhase::Accepted, 1));
    t.send(conn, cmd_event("c1", CommandPhase::Succeeded, 2));
    let (updates, end) = read(&t, "c1", &mut cursor);
    assert_eq!(updates.len(), 1);
    assert_eq!(end, UpdatePoll::Done);
    let record = t.cp.command_record("c1").expect("kept");
    assert_eq!(
        (record.edge_id.as_str(), record.operation.as_str()),
        (EDGE, "op")
    );
    assert_eq!(
        phases(&record),
        [(1, CommandPhase::Accepted), (2, CommandPhase::Succeeded)]
    );
    assert_eq!(
        record.outcome,
        Some(CommandOutcome::Finished(CommandPhase::Succeeded))
    );
    assert_eq!(t.cp.command_edge("c1"), Some(EDGE));
}

#[test]
fn an_ending_without_the_edges_word_is_in_the_record() {
    let mut t = harness();
    let (conn, _) = t.enrol(EDGE, &["op"]);
    send(&mut t, "c1");
    t.send(conn, cmd_response("c1", true));
    // The Edge comes back without it: lost.
    let (_, resp) = t.hello_with(hello(EDGE, &["op"]));
    assert!(resp.accepted);
    t.pump();
    let record = t.cp.command_record("c1").expect("kept");
    assert_eq!(record.ending(), Some(&Ending::Lost));
    assert_eq!(record.outcome, Some(CommandOutcome::Ended(Ending::Lost)));
}

#[test]
fn past_the_bound_the_oldest_histories_go_and_the_commands_go_on() {
    let mut config = CpConfig::default();
    config.command_records.records = 2;
    let mut t = harness_with(config, EnrolmentPolicy::AcceptAny);
    let (conn, _) = t.enrol(EDGE, &["op"]);
    for id in ["c1", "c2", "c3"] {
        send(&mut t, id);
        t.send(conn, cmd_response(id, true));
    }
    assert_eq!(t.cp.records_dropped(), 1);
    assert_eq!(t.cp.command_record("c1"), None, "its history went");
    assert_eq!(t.cp.command_edge("c1"), None);
    let mut cursor = 0;
    assert_eq!(read(&t, "c1", &mut cursor), (vec![], UpdatePoll::Done));
    assert!(t.cp.command_record("c2").is_some() && t.cp.command_record("c3").is_some());
    // The command itself goes on under the protocol's rules.
    t.send(conn, cmd_event("c1", CommandPhase::Accepted, 1));
    t.send(conn, cmd_event("c1", CommandPhase::Succeeded, 2));
    assert_eq!(
        t.cp.command(EDGE, "c1").unwrap().outcome,
        Some(CommandOutcome::Finished(CommandPhase::Succeeded))
    );
}

#[test]
fn the_histories_stay_within_their_byte_budget() {
    let mut config = CpConfig::default();
    config.command_records.book_bytes = 4_000;
    let mut t = harness_with(config, EnrolmentPolicy::AcceptAny);
    let (conn, _) = t.enrol(EDGE, &["op"]);
    for n in 0..40 {
        let id = format!("c{n}");
        send(&mut t, &id);
        t.send(conn, cmd_response(&id, true));
        t.send(conn, cmd_event(&id, CommandPhase::Accepted, 1));
    }
    let kept: Vec<String> = (0..40)
        .map(|n| format!("c{n}"))
        .filter(|id| t.cp.command_record(id).is_some())
        .collect();
    assert!(t.cp.records_dropped() > 0);
    assert!(
        kept.len() < 40 && kept.contains(&"c39".to_owned()),
        "{kept:?}"
    );
    // The newest are the ones kept.
    let first = kept[0][1..].parse::<usize>().unwrap();
    assert_eq!(kept.len(), 40 - first);
}

#[test]
fn a_held_command_that_could_not_be_recorded_ends_in_its_record_and_may_be_sent_anew() {
    let mut t = harness();
    let (conn, _) = t.enrol(EDGE, &["op"]);
    let spec = || CommandSpec::new("op").with_id("c1");
    t.cp.hold_command(EDGE, spec()).unwrap();
    let ending = Ending::Unrecorded {
        reason: "engine down".into(),
    };
    assert!(t.cp.end_held_command(EDGE, "c1", ending.clone()));
    assert!(
        !t.cp.end_held_command(EDGE, "c1", ending.clone()),
        "no longer held"
    );
    let record = t.cp.command_record("c1").unwrap();
    assert_eq!(record.ending(), Some(&ending));
    assert!(t.cp.command(EDGE, "c1").unwrap().ended_unsent());
    t.pump();
    assert!(
        command_requests(&t.take_frames(conn)).is_empty(),
        "never sent"
    );
    // The caller's retry under its key is a new attempt, with a new record.
    t.cp.send_command(t.now, EDGE, spec()).unwrap();
    t.pump();
    assert_eq!(command_requests(&t.take_frames(conn)).len(), 1);
    let record = t.cp.command_record("c1").unwrap();
    assert!(record.updates.is_empty() && record.outcome.is_none());
}

#[test]
fn a_held_command_another_control_plane_sent_carries_on_from_its_record() {
    let mut t = harness();
    let (conn, _) = t.enrol(EDGE, &["op"]);
    t.cp.hold_command(EDGE, CommandSpec::new("op").with_id("c1"))
        .unwrap();
    // Its record elsewhere: accepted, at RUNNING.
    let mut there = CommandRecord::new(EDGE, "c1", "op");
    there
        .updates
        .push(CommandUpdate::Response(EdgeCommandResponse {
            command_id: "c1".into(),
            accepted: true,
            ..Default::default()
        }));
    for (phase, sequence) in [(CommandPhase::Accepted, 1), (CommandPhase::Running, 2)] {
        there.updates.push(CommandUpdate::Event(EdgeCommandEvent {
            command_id: "c1".into(),
            phase: phase as i32,
            sequence,
            ..Default::default()
        }));
    }
    assert!(t.cp.replace_held_command(EDGE, there.clone()));
    t.pump();
    assert!(
        command_requests(&t.take_frames(conn)).is_empty(),
        "not sent again"
    );
    assert_eq!(t.cp.command_record("c1").unwrap().updates, there.updates);
    // The Edge's next event follows on from it.
    t.send(conn, cmd_event("c1", CommandPhase::Succeeded, 3));
    assert_eq!(
        t.cp.command_record("c1").unwrap().outcome,
        Some(CommandOutcome::Finished(CommandPhase::Succeeded))
    );
}
