//! PROTOCOL.md §4.6 across both sides: for any input to a sending API, either the API refuses
//! with its typed error, or the peer's decoder accepts everything it queued
//! ([`iop_core::testing::sender::check`]). Each case puts at most one field one past
//! its limit (the rest anywhere up to their limits); a case within every limit must
//! be sent and one past a limit refused, so the oracle cannot pass by refusing
//! everything, nor a side by sending everything. The fuzz target `sender_limits` runs
//! the same oracle on arbitrary sizes.

use iop_core::NodeRegistry;
use iop_core::limits::{
    MAX_CONTROL_PLANE_FRAME_LEN, MAX_HELLO_METADATA_ENTRIES, MAX_HELLO_METADATA_VALUE_LEN,
    MAX_HELLO_OPERATIONS, MAX_ID_LEN, MAX_INFLIGHT_COMMANDS, MAX_MAP_ENTRIES, MAX_NODES,
    MAX_RETAINED_COMMANDS, MAX_SOFTWARE_VERSION_LEN, MAX_TEXT_LEN,
};
use iop_core::registry::{NodeConfig, ProviderCategory, ProviderConfig};
use iop_core::testing::sender::{
    Case, CommandCase, ConfigCase, NodeShape, RegistryCase, ReportCase, StatusCase, Verdict, check,
};
use proptest::prelude::*;

/// Sizes for `n` fields with limits `limits`: either all within (small or at the
/// limit), or field `over` one past its limit. Returns the sizes and `over`.
fn sizes(limits: Vec<usize>) -> impl Strategy<Value = (Vec<usize>, Option<usize>)> {
    let n = limits.len();
    let within: Vec<BoxedStrategy<usize>> = limits
        .iter()
        .map(|&l| prop_oneof![0..3usize, Just(l)].boxed())
        .collect();
    (within, prop::option::weighted(0.5, 0..n)).prop_map(move |(mut s, over)| {
        if let Some(i) = over {
            s[i] = limits[i] + 1;
        }
        (s, over)
    })
}

fn id(len: usize, n: usize) -> String {
    let s = format!("{n}-{}", "i".repeat(len));
    s[..len.min(s.len())].to_owned()
}

fn entries(count: usize, key: usize, value: usize) -> Vec<(String, String)> {
    (0..count)
        .map(|n| {
            (
                format!("{n:0>width$}", width = key.max(1)),
                "v".repeat(value),
            )
        })
        .collect()
}

/// The property, and which verdict the case must have: `Some(true)` sent,
/// `Some(false)` refused, `None` either.
fn holds(case: &Case, sent: Option<bool>) -> Result<(), TestCaseError> {
    match (check(case), sent) {
        (Err(broken), _) => Err(TestCaseError::fail(broken)),
        (Ok(Verdict::Refused(why)), Some(true)) => Err(TestCaseError::fail(format!(
            "refused a case within every limit: {why}"
        ))),
        (Ok(Verdict::Sent(_)), Some(false)) => Err(TestCaseError::fail(
            "sent a case over a limit (the peer took it, but the API must refuse it)",
        )),
        _ => Ok(()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn commands((s, over) in sizes(vec![MAX_ID_LEN, MAX_TEXT_LEN, MAX_MAP_ENTRIES, MAX_ID_LEN, MAX_TEXT_LEN])) {
        let (op, sel, n, key, value) = (s[0].max(1), s[1], s[2], s[3], s[4]);
        // A key or value over its limit only breaks it if there is an entry.
        let n = if matches!(over, Some(3 | 4)) { n.max(1) } else { n };
        let case = Case::Command(CommandCase {
            operation: id(op, 0),
            selector: "s".repeat(sel),
            metadata: entries(n, key, value),
            command_id: None,
        });
        holds(&case, Some(over.is_none()))?;
    }

    #[test]
    fn status_requests(count in prop_oneof![0..3usize, Just(MAX_NODES), Just(MAX_NODES + 1)],
                       len in prop_oneof![Just(8usize), Just(MAX_ID_LEN), Just(MAX_ID_LEN + 1)]) {
        let node_ids: Vec<String> = (0..count).map(|i| id(len, i)).collect();
        let within = count <= MAX_NODES && (count == 0 || len <= MAX_ID_LEN);
        holds(&Case::Status(StatusCase { node_ids }), Some(within))?;
    }

    #[test]
    fn reports((s, over) in sizes(vec![MAX_TEXT_LEN, MAX_MAP_ENTRIES, MAX_ID_LEN, MAX_TEXT_LEN]),
               terminal in any::<bool>(),
               cp in prop_oneof![Just(64u32 << 10), Just(256 << 10), Just(4 << 20)],
               next in prop_oneof![Just(64u32 << 10), Just(4 << 20)], disconnected in any::<bool>()) {
        let (message, n, key, value) = (s[0], s[1], s[2], s[3]);
        let n = if matches!(over, Some(2 | 3)) { n.max(1) } else { n };
        let case = Case::Report(ReportCase {
            message: "m".repeat(message),
            detail: entries(n, key, value),
            terminal,
            cp_max_frame_len: cp,
            while_disconnected: disconnected,
            next_cp_max_frame_len: next,
        });
        // Within the field caps it may still be over the CP's frame limit: then
        // refused on a live session, or held to the last limit while disconnected.
        let size = message + n * (key + value + 8) + 64;
        let verdict = match over {
            Some(_) => Some(false),
            None if size < 60_000 => Some(true),
            None => None,
        };
        holds(&case, verdict)?;
    }

    #[test]
    fn edge_configs((s, over) in sizes(vec![MAX_HELLO_OPERATIONS, MAX_ID_LEN, MAX_HELLO_METADATA_ENTRIES - 1,
                                            MAX_HELLO_METADATA_VALUE_LEN, MAX_SOFTWARE_VERSION_LEN, MAX_TEXT_LEN,
                                            MAX_INFLIGHT_COMMANDS, MAX_RETAINED_COMMANDS]),
                    low_frame_limit in any::<bool>(), finished in prop_oneof![0..3usize, Just(30usize)],
                    running in 0..4usize) {
        let (ops, op_len, meta, value, version, credential, inflight, retained) =
            (s[0], s[1].max(4), s[2], s[3], s[4], s[5], s[6], s[7]);
        let ops = if over == Some(1) { ops.max(1) } else { ops };
        let meta = if over == Some(3) { meta.max(1) } else { meta };
        let frame = MAX_CONTROL_PLANE_FRAME_LEN as u32 - u32::from(low_frame_limit);
        let case = Case::Config(ConfigCase {
            edge_id: "edge-1".into(),
            operations: (0..ops).map(|i| id(op_len, i)).collect(),
            metadata: entries(meta, 8, value),
            software_version: "v".repeat(version),
            credential: vec![7; credential],
            max_inflight_commands: inflight,
            max_retained_commands: retained,
            max_frame_len: frame,
            finished,
            running,
        });
        holds(&case, Some(over.is_none() && !low_frame_limit))?;
    }

    #[test]
    fn status_answers(nodes in 0..12usize, providers in prop_oneof![0..3usize, Just(256usize)],
                      models in prop_oneof![0..3usize, Just(256usize)], model_len in prop_oneof![Just(1usize), Just(100)],
                      labels in prop_oneof![0..3usize, Just(64usize)], ready in any::<bool>(),
                      named in any::<bool>(), cp in prop_oneof![Just(64u32 << 10), Just(1 << 20)],
                      naive in any::<bool>()) {
        let shapes: Vec<NodeShape> = (0..nodes)
            .map(|i| NodeShape { node_id: format!("node-{i:03}"), providers, models, model_len, labels, ready })
            .collect();
        let node_ids = if named { shapes.iter().step_by(2).map(|s| s.node_id.clone()).collect() } else { Vec::new() };
        let case = Case::Registry(RegistryCase { nodes: shapes, node_ids, cp_max_frame_len: cp, naive });
        holds(&case, Some(true))?;
    }

    /// The registry's encoder counts the heap a receiver decodes its bytes into as the
    /// decoder's own walk does, so it needs no second pass over them.
    #[test]
    fn the_encoder_counts_the_decoded_heap_as_the_decoder_does(
        nodes in 0..12usize, providers in 0..6usize, models in 0..6usize, model_len in 0..20usize,
        labels in 0..70usize, node_models in 0..5usize, revision in 0..10usize) {
        let mut registry = NodeRegistry::new();
        for i in 0..nodes {
            let mut node = NodeConfig::new(format!("n{i}")).with_revision("r".repeat(revision));
            for m in 0..node_models {
                node = node.with_model(format!("nm{m}"));
            }
            for l in 0..labels.min(64) {
                node = node.with_label(format!("k{l}"), "v".repeat(l % 9 + 1));
            }
            for p in 0..providers {
                let mut provider = ProviderConfig::new(format!("p{p}"), ProviderCategory::Api, 2, 1);
                for m in 0..models {
                    provider = provider.with_model(format!("{m}{}", "m".repeat(model_len)));
                }
                node = node.with_provider(provider);
            }
            let _ = registry.configure(node, 0).unwrap();
        }
        let mut out = Vec::new();
        let written = registry.encode_snapshot("edge-1", 7, &[] as &[&str], usize::MAX, &mut out);
        let walked = iop_core::proto::limits::send::status_response_heap(&out).unwrap();
        // The walk adds what prost's error for malformed bytes would cost (512).
        prop_assert_eq!(written.heap + 512, walked);
    }
}

/// The largest hello: 256 running and 1 024 finished commands with 128-byte ids,
/// every hello field at its cap. The Edge lists them all, and a CP accepts it.
#[test]
fn the_largest_hello_lists_every_held_command_and_is_accepted() {
    let case = Case::Config(ConfigCase {
        edge_id: id(MAX_ID_LEN, 0),
        operations: (0..MAX_HELLO_OPERATIONS)
            .map(|i| id(MAX_ID_LEN, i))
            .collect(),
        metadata: entries(
            MAX_HELLO_METADATA_ENTRIES - 1,
            MAX_ID_LEN,
            MAX_HELLO_METADATA_VALUE_LEN,
        ),
        software_version: "v".repeat(MAX_SOFTWARE_VERSION_LEN),
        credential: vec![7; MAX_TEXT_LEN],
        max_inflight_commands: MAX_INFLIGHT_COMMANDS,
        max_retained_commands: MAX_RETAINED_COMMANDS,
        max_frame_len: MAX_CONTROL_PLANE_FRAME_LEN as u32,
        finished: MAX_RETAINED_COMMANDS,
        running: MAX_INFLIGHT_COMMANDS,
    });
    assert_eq!(check(&case), Ok(Verdict::Sent(2)));
}

/// 8 000 nodes with 64 labels each: 5 MB on the wire, decoded 15 times that, so even
/// the 4 MiB that fit a frame decode past the CP's budget (8 × wire size). The Edge
/// sends fewer nodes, within the budget, rather than a frame the CP must refuse: the
/// node registry's encoder by counting as it writes, and for a custom registry that
/// knows only the byte budget, the Edge by checking its bytes and asking for fewer.
#[test]
fn a_status_too_heavy_to_decode_is_cut_to_fit() {
    let shapes: Vec<NodeShape> = (0..8_000)
        .map(|i| NodeShape {
            node_id: format!("n{i:04}"),
            providers: 0,
            models: 0,
            model_len: 0,
            labels: 64,
            ready: false,
        })
        .collect();
    for naive in [false, true] {
        let case = Case::Registry(RegistryCase {
            nodes: shapes.clone(),
            node_ids: Vec::new(),
            cp_max_frame_len: 4 << 20,
            naive,
        });
        assert!(
            matches!(check(&case), Ok(Verdict::Sent(_))),
            "naive: {naive}"
        );
    }
}
