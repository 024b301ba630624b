//! `registry_ops` on hand-written sequences, against the model.

use super::*;

fn spec(id: u8, capacity: u8, long_capacity: u8) -> ProviderSpec {
    ProviderSpec {
        id,
        category: 2,
        capacity,
        long_capacity,
    }
}

/// A realistic life, so the model is known to agree with the registry on the
/// paths that matter (and the checks do not only pass on rejected calls).
#[test]
fn a_full_lifecycle_agrees_with_the_model() {
    let ops = vec![
        Op::Configure {
            node: 0,
            providers: vec![spec(0, 2, 1), spec(1, 1, 0)],
            label: Some(0),
        },
        Op::Connect { node: 0 },
        Op::Connect { node: 0 }, // duplicate
        Op::MarkReady {
            node: 0,
            generation: 0,
        }, // first generation issued
        Op::Admit {
            node: 0,
            provider: 0,
            long: true,
        },
        Op::Admit {
            node: 0,
            provider: 0,
            long: true,
        }, // long-context pool full
        Op::Admit {
            node: 0,
            provider: 0,
            long: false,
        },
        Op::Admit {
            node: 0,
            provider: 0,
            long: false,
        }, // at capacity
        Op::Enqueue {
            long: true,
            candidates: vec![(0, 0), (0, 1), (0, 0), (1, 0)],
        },
        Op::SetOnline {
            node: 0,
            provider: 1,
            online: false,
        },
        Op::SetHealthy {
            node: 0,
            provider: 0,
            healthy: false,
        },
        Op::Drain {
            node: 0,
            drained: true,
        },
        Op::Snapshot {
            nodes: vec![],
            budget: 40,
        },
        Op::Configure {
            node: 0,
            providers: vec![spec(1, 1, 0)],
            label: None,
        }, // busy
        Op::Release { lease: 0 },
        Op::Close {
            node: 0,
            generation: 0,
        },
        Op::Release { lease: 0 }, // stale after the close
        Op::Close {
            node: 0,
            generation: 0,
        }, // stale close
        Op::Connect { node: 0 },
        Op::Close {
            node: 0,
            generation: 1,
        }, // pending abandoned
        Op::Resolve {
            selector: "label:zone=a".into(),
            node_level: true,
        },
        Op::Dequeue { ticket: 0 },
        Op::Remove { node: 0 },
        Op::DrainEvents,
    ];
    run(Input {
        event_capacity: 7,
        ops,
    });
}
