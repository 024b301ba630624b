//! The watch log: every change of the fleet's load in order, read from any cursor;
//! a cursor the bounded log no longer covers is a gap (start again from a snapshot).

mod common;

use std::sync::Arc;

use common::{load_view, p};
use iop_core::cp::load::{EdgeLoad, LoadChange};
use iop_core::cp::{CloseReason, CpEvent, ForgetReason};
use iop_fleet::{ChangeKind, Fleet, FleetConfig, WatchGap};

/// `edge`'s view: one provider of capacity 4 serving `m`, `in_flight` busy.
fn view(edge: &str, in_flight: u32) -> Arc<EdgeLoad> {
    common::view(edge, &[("eu", vec![p("p", "m", 4, in_flight, 0)])])
}

#[test]
fn every_change_is_read_in_order_and_a_watcher_left_behind_finds_a_gap() {
    let mut config = FleetConfig::default();
    config.watch_changes = 4;
    let mut f = Fleet::new(config).unwrap();
    assert_eq!(f.last_change(), 0);
    f.handle_event(&load_view("a", 10, LoadChange::Replaced(view("a", 0))));
    f.handle_event(&load_view(
        "a",
        20,
        LoadChange::Updated {
            view: view("a", 3),
            changed: vec![0],
        },
    ));
    // A confirmation changes no number, but the numbers' age starts again.
    f.handle_event(&load_view("a", 30, LoadChange::Confirmed));
    f.handle_event(&CpEvent::EdgeDisconnected {
        edge_id: "a".into(),
        session_id: 1,
        reason: CloseReason::TransportClosed,
    });
    let changes = f.changes_since(0, 100).unwrap();
    let kinds: Vec<(u64, Option<u64>, &str)> = changes
        .iter()
        .map(|c| {
            let kind = match &c.kind {
                ChangeKind::View(_) => "view",
                ChangeKind::Numbers { changed, view } => {
                    assert_eq!(
                        (&changed[..], view.providers().next().unwrap().in_flight()),
                        (&[0][..], 3)
                    );
                    "numbers"
                }
                ChangeKind::Confirmed => "confirmed",
                ChangeKind::Offline => "offline",
                ChangeKind::Gone => "gone",
                _ => "other",
            };
            (c.seq, c.at_unix_ms, kind)
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (1, Some(10), "view"),
            (2, Some(20), "numbers"),
            (3, Some(30), "confirmed"),
            (4, None, "offline")
        ]
    );
    // A watcher that read up to 1 reads on from 2.
    assert_eq!(f.changes_since(1, 1).unwrap()[0].seq, 2);

    f.handle_event(&CpEvent::EdgeForgotten {
        edge_id: "a".into(),
        reason: ForgetReason::Asked,
        unfinished_commands: Vec::new(),
    });
    f.handle_event(&load_view("b", 40, LoadChange::Replaced(view("b", 1))));
    assert_eq!(f.last_change(), 6);
    // The log keeps 4: a watcher still at 0 has lost changes 1 and 2.
    assert_eq!(
        f.changes_since(0, 100),
        Err(WatchGap {
            after: 0,
            oldest: 3
        })
    );
    let tail = f.changes_since(4, 100).unwrap();
    assert_eq!(tail.len(), 2);
    assert_eq!((&*tail[0].edge_id, &tail[0].kind), ("a", &ChangeKind::Gone));
}
