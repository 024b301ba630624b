use super::*;

fn event(sequence: u32, phase: CommandPhase, detail_bytes: usize) -> CommandUpdate {
    CommandUpdate::Event(EdgeCommandEvent {
        command_id: "c".into(),
        phase: phase as i32,
        sequence,
        detail: [("k".to_owned(), "d".repeat(detail_bytes))].into(),
        ..Default::default()
    })
}

fn phases(h: &History) -> Vec<(u32, CommandPhase)> {
    (h.updates.iter())
        .filter_map(|u| match u {
            CommandUpdate::Event(e) => Some((e.sequence, e.phase())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_record_keeps_its_first_latest_running_and_terminal_events() {
    let limits = RecordLimits::default();
    let mut h = History::default();
    h.push(event(1, CommandPhase::Accepted, 0), &limits);
    for seq in 2..=101 {
        h.push(event(seq, CommandPhase::Running, 0), &limits);
    }
    h.push(event(102, CommandPhase::Succeeded, 0), &limits);
    let kept = phases(&h);
    assert_eq!(kept.first(), Some(&(1, CommandPhase::Accepted)));
    assert_eq!(kept.last(), Some(&(102, CommandPhase::Succeeded)));
    let running: Vec<u32> = (kept.iter())
        .filter(|(_, p)| *p == CommandPhase::Running)
        .map(|(s, _)| *s)
        .collect();
    assert_eq!(running, (86..=101).collect::<Vec<_>>());
    assert_eq!(h.coalesced, 84);
    assert_eq!(h.bytes, h.updates.iter().map(update_bytes).sum::<usize>());
}

#[test]
fn a_record_stays_within_its_bytes() {
    let limits = RecordLimits {
        running_events: 1_000,
        record_bytes: 10_000,
        ..RecordLimits::default()
    };
    let mut h = History::default();
    h.push(event(1, CommandPhase::Accepted, 0), &limits);
    for seq in 2..=50 {
        h.push(event(seq, CommandPhase::Running, 1_000), &limits);
    }
    assert!(h.bytes <= 10_000, "{}", h.bytes);
    assert!(h.coalesced > 30, "{}", h.coalesced);
    assert_eq!(h.bytes, h.updates.iter().map(update_bytes).sum::<usize>());
}

#[test]
fn a_reader_keeps_its_place_while_events_are_coalesced() {
    let limits = RecordLimits {
        running_events: 2,
        ..RecordLimits::default()
    };
    let mut h = History::default();
    let mut cursor = 0;
    let mut seen = Vec::new();
    h.push(event(1, CommandPhase::Accepted, 0), &limits);
    for seq in 2..=6 {
        h.push(event(seq, CommandPhase::Running, 0), &limits);
        // Read one update per push, from where it was.
        if let Some(CommandUpdate::Event(e)) = h.next(&mut cursor) {
            seen.push(e.sequence);
        }
    }
    // Caught up by the end, never twice, never backwards, skipping only what was
    // coalesced before it was read.
    while let Some(CommandUpdate::Event(e)) = h.next(&mut cursor) {
        seen.push(e.sequence);
    }
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    assert_eq!(seen.last(), Some(&6));
    assert_eq!(seen.first(), Some(&1));
}
