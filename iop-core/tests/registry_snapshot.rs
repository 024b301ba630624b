//! Snapshot size budget and the direct encoder: the budget is never exceeded, truncation
//! keeps whole nodes in order, and `encode_snapshot` writes exactly the bytes of the
//! built message.

use iop_core::proto::{EdgeStatusResponse, Message};
use iop_core::registry::{
    Candidate, LeaseKind, NodeConfig, NodeEndpoint, NodeRegistry, ProviderCategory, ProviderConfig,
    STATUS_ENVELOPE_OVERHEAD,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct NodeSpec {
    labels: usize,
    providers: Vec<(u32, u32, usize)>,
    /// 0 configured, 1 pending, 2 ready, 3 disconnected.
    state: u8,
    leases: usize,
    drained: bool,
    offline_first: bool,
    unhealthy_last: bool,
    big_time: bool,
}

fn arb_node() -> impl Strategy<Value = NodeSpec> {
    (
        0usize..4,
        proptest::collection::vec((0u32..300, 0u32..4, 0usize..3), 0..5),
        0u8..4,
        0usize..4,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(
                labels,
                providers,
                state,
                leases,
                drained,
                offline_first,
                unhealthy_last,
                big_time,
            )| {
                NodeSpec {
                    labels,
                    providers,
                    state,
                    leases,
                    drained,
                    offline_first,
                    unhealthy_last,
                    big_time,
                }
            },
        )
}

fn build(specs: &[NodeSpec]) -> NodeRegistry {
    let mut reg = NodeRegistry::new();
    for (i, s) in specs.iter().enumerate() {
        let id = format!("node-{i:03}");
        let now = if s.big_time { 1_764_000_000_000 } else { 5 };
        let mut c = NodeConfig::new(&id)
            .with_revision(if i % 2 == 0 { "" } else { "sha256:0123" })
            .with_endpoint(NodeEndpoint::new("10.1.1.1:1", "t"));
        for l in 0..s.labels {
            c = c.with_label(format!("k{l}"), format!("v{i}"));
        }
        for (p, (cap, long, models)) in s.providers.iter().enumerate() {
            let mut pc = ProviderConfig::new(
                format!("p{p}"),
                [
                    ProviderCategory::Cli,
                    ProviderCategory::Api,
                    ProviderCategory::LocalInference,
                ][p % 3],
                *cap,
                (*long).min(*cap),
            );
            for m in 0..*models {
                pc = pc.with_model(format!("model-{m}"));
            }
            c = c.with_provider(pc);
        }
        let _ = reg.configure(c, now).expect("valid config");
        if s.state >= 1 {
            let g = reg.connect(&id, now + 1).expect("connect");
            if s.state >= 2 {
                let _ = reg.mark_ready(&id, g, now + 2);
                for l in 0..s.leases {
                    let p = format!("p{}", l % s.providers.len().max(1));
                    let kind = if l % 2 == 0 {
                        LeaseKind::Normal
                    } else {
                        LeaseKind::LongContext
                    };
                    // Leases are kept alive on purpose: their counts are what we report.
                    std::mem::forget(reg.admit(&id, &p, kind));
                }
                let _ = reg.enqueue(LeaseKind::LongContext, vec![Candidate::new(&id, "p0")]);
            }
            if s.state == 3 {
                let _ = reg.close(&id, g, "gone", now + 3);
            }
        }
        if s.drained {
            let _ = reg.drain(&id);
        }
        if s.offline_first {
            let _ = reg.set_provider_online(&id, "p0", false);
        }
        if s.unhealthy_last && !s.providers.is_empty() {
            let last = format!("p{}", s.providers.len() - 1);
            let _ = reg.set_provider_healthy(&id, &last, false);
        }
    }
    reg
}

fn check_budget(reg: &NodeRegistry, filter: &[String], budget: usize) -> EdgeStatusResponse {
    let full = reg.snapshot("edge-x", 42, filter, usize::MAX);
    let cut = reg.snapshot("edge-x", 42, filter, budget);
    let cut_len = cut.encoded_len();
    let empty = EdgeStatusResponse {
        nodes: Vec::new(),
        truncated: !full.nodes.is_empty(),
        ..full.clone()
    };
    if budget >= empty.encoded_len() {
        assert!(cut_len <= budget, "{cut_len} > {budget}");
    } else {
        assert!(cut.nodes.is_empty());
    }
    assert!(!full.truncated);
    assert_eq!(cut.truncated, cut.nodes.len() < full.nodes.len());
    assert_eq!(
        cut.nodes[..],
        full.nodes[..cut.nodes.len()],
        "the nodes present are complete and in order"
    );
    if cut.truncated && cut.nodes.len() < full.nodes.len() {
        // Greedy: the next node would not have fit.
        let mut more = cut.clone();
        more.nodes.push(full.nodes[cut.nodes.len()].clone());
        assert!(more.encoded_len() > budget);
    }
    let mut direct = Vec::new();
    let summary = reg.encode_snapshot("edge-x", 42, filter, budget, &mut direct);
    assert_eq!(
        direct,
        cut.encode_to_vec(),
        "direct encoding = built message"
    );
    assert_eq!(summary.nodes, cut.nodes.len());
    assert_eq!(summary.truncated, cut.truncated);
    assert_eq!(summary.len, direct.len());
    cut
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::Direct(
                "proptest-regressions/registry_snapshot.txt",
            ),
        )),
        ..ProptestConfig::default()
    })]

    #[test]
    fn budget_truncates_at_whole_nodes_and_direct_encoding_matches(
        specs in proptest::collection::vec(arb_node(), 0..12),
        budget in 0usize..3_000,
        filter in proptest::collection::vec(0usize..14, 0..4),
    ) {
        let reg = build(&specs);
        let filter: Vec<String> = filter.iter().map(|i| format!("node-{i:03}")).collect();
        check_budget(&reg, &filter, budget);
        check_budget(&reg, &[], budget);
        check_budget(&reg, &[], usize::MAX);
    }
}

#[test]
fn budget_exactly_at_full_size_is_not_truncated() {
    let specs: Vec<NodeSpec> = (0..5)
        .map(|i| NodeSpec {
            labels: 1,
            providers: vec![(2, 1, 1); 2],
            state: (i % 4) as u8,
            leases: 1,
            drained: false,
            offline_first: false,
            unhealthy_last: false,
            big_time: true,
        })
        .collect();
    let reg = build(&specs);
    let full_len = reg
        .snapshot("edge-x", 42, &[] as &[&str], usize::MAX)
        .encoded_len();
    let exact = check_budget(&reg, &[], full_len);
    assert!(!exact.truncated);
    assert_eq!(exact.nodes.len(), 5);
    let short = check_budget(&reg, &[], full_len - 1);
    assert!(short.truncated);
    assert_eq!(short.nodes.len(), 4);
}

#[test]
fn thousand_nodes_with_four_providers_fit_a_default_frame() {
    let specs: Vec<NodeSpec> = (0..1_000)
        .map(|i| NodeSpec {
            labels: 2,
            providers: vec![(8, 2, 2); 4],
            state: (i % 4) as u8,
            leases: 3,
            drained: i % 7 == 0,
            offline_first: i % 5 == 0,
            unhealthy_last: i % 3 == 0,
            big_time: true,
        })
        .collect();
    let reg = build(&specs);
    let budget = iop_core::proto::DEFAULT_MAX_FRAME_LEN as usize - STATUS_ENVELOPE_OVERHEAD;
    let status = reg.snapshot("edge", 1, &[] as &[&str], budget);
    assert_eq!(status.nodes.len(), 1_000);
    assert!(!status.truncated);
    let mut out = Vec::with_capacity(status.encoded_len());
    let summary = reg.encode_snapshot("edge", 1, &[] as &[&str], budget, &mut out);
    assert_eq!(summary.nodes, 1_000);
    assert_eq!(out, status.encode_to_vec());
    // A budget of a tenth truncates at a node boundary.
    let tenth = check_budget(&reg, &[], out.len() / 10);
    assert!(tenth.truncated);
    assert!(!tenth.nodes.is_empty());
}

#[test]
fn an_offline_provider_reports_zeros_and_its_configured_capacity_stays_readable() {
    let mut reg = NodeRegistry::new();
    let vllm = ProviderConfig::new("vllm", ProviderCategory::LocalInference, 4, 1);
    reg.configure(NodeConfig::new("gpu-1").with_provider(vllm), 1)
        .unwrap();
    let capacity = |reg: &NodeRegistry| {
        let status = reg.snapshot("e", 2, &["gpu-1"], usize::MAX);
        let p = &status.nodes[0].provider_snapshots[0];
        (p.capacity, p.long_context_capacity)
    };
    // Not READY: the wire says zero (PROTOCOL.md §5.2), the registry keeps what was configured.
    assert_eq!(capacity(&reg), (0, 0));
    let configured = reg.provider_config("gpu-1", "vllm").unwrap();
    assert_eq!(
        (configured.capacity, configured.long_context_capacity),
        (4, 1)
    );
    // READY: the configured numbers are on the wire again, in the same transition.
    let generation = reg.connect_ready("gpu-1", 3).unwrap();
    assert_eq!(capacity(&reg), (4, 1));
    let _ = reg.close("gpu-1", generation, "gone", 4);
    assert_eq!(capacity(&reg), (0, 0));
    assert_eq!(reg.provider_config("gpu-1", "vllm").unwrap().capacity, 4);
    assert!(reg.provider_config("gpu-1", "other").is_none());
    assert!(reg.provider_config("gpu-9", "vllm").is_none());
}
