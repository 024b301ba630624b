//! Revisions, configuration updates and their checks, snapshot filters, the event
//! queue's bound, accessors.

use super::*;

#[test]
fn revision_bumps_on_every_change_and_never_on_a_no_op() {
    let mut reg = NodeRegistry::new();
    let r0 = reg.revision();
    let _ = reg.configure(node("n1"), 1);
    let r1 = reg.revision();
    assert!(r1 > r0);
    assert_eq!(
        reg.configure(node("n1"), 2),
        Ok(ConfigureOutcome::Unchanged)
    );
    assert_eq!(reg.revision(), r1);
    assert_eq!(
        reg.configure(node("n1").with_label("tier", "gold"), 3),
        Ok(ConfigureOutcome::Updated)
    );
    let r2 = reg.revision();
    assert!(r2 > r1);
    let g = reg.connect("n1", 4).expect("connect");
    let r3 = reg.revision();
    assert!(r3 > r2);
    let _ = reg.connect("n1", 4);
    let _ = reg.close("n1", Generation::from_raw(77), "", 4);
    let _ = reg.mark_ready("n1", Generation::from_raw(77), 4);
    let _ = reg.set_provider_online("n1", "gpu", true);
    let _ = reg.resume("n1");
    assert_eq!(
        reg.revision(),
        r3,
        "rejected, stale and no-op calls change nothing"
    );
    let _ = reg.mark_ready("n1", g, 5);
    assert!(reg.revision() > r3);
    assert_eq!(snap(&reg).registry_revision, reg.revision());
}

#[test]
fn config_update_emits_node_configured_and_keeps_ownership() {
    let mut reg = registry_with(&["n1"]);
    let g = ready(&mut reg, "n1", 5);
    let lease = reg.admit("n1", "gpu", LeaseKind::Normal).expect("admit");
    drain_events(&mut reg);
    let updated = node("n1").with_revision("sha256:def");
    assert_eq!(reg.configure(updated, 6), Ok(ConfigureOutcome::Updated));
    assert_eq!(
        kinds(&mut reg),
        [("n1".to_owned(), RegistryEventKind::Configured, g.get())]
    );
    let n = node_snap(&reg, "n1");
    assert_eq!(n.state, NodeState::Ready as i32);
    assert_eq!(n.config.expect("config").revision, "sha256:def");
    assert_eq!(provider(&reg, "n1", "gpu").in_flight, 1);
    assert_eq!(reg.release(lease), ReleaseOutcome::Released);
}

#[test]
fn config_update_cannot_drop_a_busy_provider() {
    let mut reg = registry_with(&["n1"]);
    let _g = ready(&mut reg, "n1", 5);
    let _lease = reg.admit("n1", "gpu", LeaseKind::Normal).expect("admit");
    let without_gpu = NodeConfig::new("n1").with_provider(ProviderConfig::new(
        "api",
        ProviderCategory::Api,
        4,
        0,
    ));
    assert!(matches!(
        reg.configure(without_gpu, 6),
        Err(ConfigError::ProviderBusy { ref provider_id, in_flight: 1, .. }) if provider_id == "gpu"
    ));
    let shrunk = NodeConfig::new("n1").with_provider(ProviderConfig::new(
        "gpu",
        ProviderCategory::Cli,
        0,
        0,
    ));
    assert!(matches!(
        reg.configure(shrunk, 6),
        Err(ConfigError::ProviderBusy { .. })
    ));
}

#[test]
fn configuration_is_validated() {
    let mut reg = NodeRegistry::new();
    let bad = |reg: &mut NodeRegistry, c: NodeConfig| reg.configure(c, 1).expect_err("refused");
    assert!(matches!(
        bad(&mut reg, NodeConfig::new("bad id")),
        ConfigError::InvalidNodeId(_)
    ));
    assert!(matches!(
        bad(&mut reg, NodeConfig::new("n").with_label("k", "a=b")),
        ConfigError::InvalidLabel(_)
    ));
    let mut many_labels = NodeConfig::new("n");
    for i in 0..65 {
        many_labels = many_labels.with_label(format!("k{i}"), "v");
    }
    assert!(matches!(
        bad(&mut reg, many_labels),
        ConfigError::TooManyLabels { count: 65, max: 64 }
    ));
    let mut many_providers = NodeConfig::new("n");
    for i in 0..257 {
        many_providers = many_providers.with_provider(ProviderConfig::new(
            format!("p{i}"),
            ProviderCategory::Cli,
            1,
            0,
        ));
    }
    assert!(matches!(
        bad(&mut reg, many_providers),
        ConfigError::TooManyProviders {
            count: 257,
            max: 256
        }
    ));
    let twice = NodeConfig::new("n")
        .with_provider(ProviderConfig::new("p", ProviderCategory::Cli, 1, 0))
        .with_provider(ProviderConfig::new("p", ProviderCategory::Api, 1, 0));
    assert!(matches!(
        bad(&mut reg, twice),
        ConfigError::DuplicateProvider { .. }
    ));
    let long_above =
        NodeConfig::new("n").with_provider(ProviderConfig::new("p", ProviderCategory::Cli, 1, 2));
    assert!(matches!(
        bad(&mut reg, long_above),
        ConfigError::LongContextCapacityAboveCapacity { .. }
    ));
    assert!(matches!(
        bad(&mut reg, NodeConfig::new("n").with_model("")),
        ConfigError::InvalidName { what: "model", .. }
    ));
    assert!(matches!(
        bad(
            &mut reg,
            NodeConfig::new("n").with_provider(ProviderConfig::new(
                "p/q",
                ProviderCategory::Cli,
                1,
                0
            ))
        ),
        ConfigError::InvalidProviderId(_)
    ));
    assert!(reg.is_empty());
    assert_eq!(reg.revision(), 0);
    assert!(reg.poll_event().is_none());
}

#[test]
fn snapshot_filter_reports_asked_nodes_sorted_once_and_skips_unknown_ids() {
    let reg = registry_with(&["b", "a", "c"]);
    let all: Vec<_> = snap(&reg).nodes.into_iter().map(|n| n.node_id).collect();
    assert_eq!(all, ["a", "b", "c"]);
    let some: Vec<_> = reg
        .snapshot(EDGE, 1, &["c", "zzz", "a", "c"], usize::MAX)
        .nodes
        .into_iter()
        .map(|n| n.node_id)
        .collect();
    assert_eq!(some, ["a", "c"]);
    let none = reg.snapshot(EDGE, 1, &["zzz"], usize::MAX);
    assert!(none.nodes.is_empty());
    assert!(!none.truncated);
}

#[test]
fn event_queue_is_bounded_and_counts_drops() {
    let mut reg = NodeRegistry::with_event_capacity(2);
    for id in ["a", "b", "c", "d"] {
        let _ = reg.configure(node(id), 1);
    }
    assert_eq!(reg.pending_events(), 2);
    assert_eq!(reg.take_dropped_events(), 2);
    assert_eq!(reg.take_dropped_events(), 0);
    let first: Vec<_> = drain_events(&mut reg)
        .into_iter()
        .map(|e| e.node_id)
        .collect();
    assert_eq!(first, ["a", "b"], "oldest kept, newest dropped");
    assert_eq!(reg.len(), 4, "dropping events never affects the registry");
}

#[test]
fn accessors_report_the_registry_as_configured() {
    let mut reg = registry_with(&["b", "a"]);
    assert_eq!(reg.len(), 2);
    assert!(reg.contains("a") && !reg.contains("z"));
    assert_eq!(reg.node_ids().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(
        reg.node_state("a"),
        Some((NodeState::Configured, Generation::NONE))
    );
    assert_eq!(reg.node_state("z"), None);
    assert_eq!(reg.is_drained("a"), Some(false));
    let config = reg.node_config("a").expect("configured");
    assert_eq!(config.endpoint.address(), "10.0.0.1:7000");
    let ids: Vec<_> = config
        .providers
        .iter()
        .map(|p| p.provider_id.as_str())
        .collect();
    assert_eq!(ids, ["api", "gpu"]);
    let t = reg
        .enqueue(LeaseKind::Normal, vec![Candidate::new("a", "gpu")])
        .expect("enqueue");
    assert_eq!(reg.queue_len(), 1);
    assert_eq!(reg.dequeue(t), DequeueOutcome::Dequeued);
    assert_eq!(reg.queue_len(), 0);
    let g = ready(&mut reg, "a", 3);
    assert_eq!(reg.node_state("a"), Some((NodeState::Ready, g)));
}
