//! Target selectors (PROTOCOL.md §6): grammar, resolution in any node state, and level checks.

use iop_core::proto::CommandRejectReason;
use iop_core::registry::{
    NodeConfig, NodeRegistry, ProviderCategory, ProviderConfig, ResolveError, Selector,
    SelectorError, Target, TargetError, TargetLevel, resolve_target,
};

fn registry() -> NodeRegistry {
    let mut reg = NodeRegistry::new();
    let p = ProviderConfig::new("cli", ProviderCategory::Cli, 1, 0);
    for (id, zone) in [("n2", "a"), ("n1", "a"), ("n3", "b")] {
        let c = NodeConfig::new(id)
            .with_label("zone", zone)
            .with_provider(p.clone());
        let _ = reg.configure(c, 1).expect("configure");
    }
    // One node READY, one PENDING, one CONFIGURED: selectors ignore state.
    let g = reg.connect("n1", 2).expect("connect");
    let _ = reg.mark_ready("n1", g, 3);
    let _ = reg.connect("n2", 4).expect("connect");
    reg
}

fn nodes(ids: &[&str]) -> Target {
    Target::Nodes(ids.iter().map(|s| (*s).to_owned()).collect())
}

#[test]
fn selector_grammar_parses_every_form() {
    assert_eq!(Selector::parse(""), Ok(Selector::Edge));
    assert_eq!(Selector::parse("*"), Ok(Selector::All));
    assert_eq!(
        Selector::parse("node:n-1.a_b"),
        Ok(Selector::Node("n-1.a_b".into()))
    );
    assert_eq!(
        Selector::parse("provider:n1/gpu-0"),
        Ok(Selector::Provider {
            node_id: "n1".into(),
            provider_id: "gpu-0".into()
        })
    );
    assert_eq!(
        Selector::parse("label:team/x=blue"),
        Ok(Selector::Label {
            key: "team/x".into(),
            value: "blue".into()
        })
    );
    assert!(!Selector::Edge.is_node_level());
    assert!(Selector::All.is_node_level());
    assert!(Selector::Node("a".into()).is_node_level());
}

#[test]
fn malformed_selectors_are_rejected_with_a_typed_cause() {
    type Check = fn(&SelectorError) -> bool;
    let cases: &[(&str, Check)] = &[
        (" ", |e| matches!(e, SelectorError::UnknownForm)),
        ("**", |e| matches!(e, SelectorError::UnknownForm)),
        ("host:n1", |e| matches!(e, SelectorError::UnknownForm)),
        ("Node:n1", |e| matches!(e, SelectorError::UnknownForm)),
        ("node:", |e| matches!(e, SelectorError::InvalidNodeId(_))),
        ("node:a b", |e| matches!(e, SelectorError::InvalidNodeId(_))),
        (" node:a", |e| matches!(e, SelectorError::UnknownForm)),
        ("provider:n1", |e| {
            matches!(e, SelectorError::MissingProviderSeparator)
        }),
        ("provider:/p", |e| {
            matches!(e, SelectorError::InvalidNodeId(_))
        }),
        ("provider:n1/", |e| {
            matches!(e, SelectorError::InvalidProviderId(_))
        }),
        ("provider:n1/p/q", |e| {
            matches!(e, SelectorError::InvalidProviderId(_))
        }),
        ("label:zone", |e| {
            matches!(e, SelectorError::MissingLabelSeparator)
        }),
        ("label:=a", |e| matches!(e, SelectorError::InvalidLabel(_))),
        ("label:zone=", |e| {
            matches!(e, SelectorError::InvalidLabel(_))
        }),
        ("label:zone=a=b", |e| {
            matches!(e, SelectorError::InvalidLabel(_))
        }),
    ];
    for (input, expected) in cases {
        let err = Selector::parse(input).expect_err(input);
        assert!(expected(&err), "{input:?} gave {err:?}");
        assert!(!err.to_string().is_empty());
    }
    let long = format!("node:{}", "x".repeat(129));
    assert!(matches!(
        Selector::parse(&long),
        Err(SelectorError::InvalidNodeId(_))
    ));
}

#[test]
fn selectors_resolve_against_configured_nodes_in_any_state() {
    let reg = registry();
    assert_eq!(reg.resolve(&Selector::All), Ok(nodes(&["n1", "n2", "n3"])));
    assert_eq!(
        reg.resolve(&Selector::Node("n3".into())),
        Ok(nodes(&["n3"]))
    );
    assert_eq!(
        reg.resolve(&Selector::parse("label:zone=a").expect("parse")),
        Ok(nodes(&["n1", "n2"]))
    );
    assert_eq!(
        reg.resolve(&Selector::parse("provider:n3/cli").expect("parse")),
        Ok(Target::Provider {
            node_id: "n3".into(),
            provider_id: "cli".into()
        })
    );
    for miss in [
        "node:n9",
        "label:zone=c",
        "label:team=a",
        "provider:n3/gpu",
        "provider:n9/cli",
    ] {
        assert_eq!(
            reg.resolve(&Selector::parse(miss).expect("parse")),
            Err(ResolveError::NoMatchingTarget),
            "{miss}"
        );
    }
    assert_eq!(reg.resolve(&Selector::Edge), Ok(Target::Edge));
}

#[test]
fn star_on_an_edge_without_nodes_is_no_matching_target() {
    let reg = NodeRegistry::new();
    assert_eq!(
        reg.resolve(&Selector::All),
        Err(ResolveError::NoMatchingTarget)
    );
    let err = resolve_target(&reg, "*", TargetLevel::Node).expect_err("no nodes");
    assert_eq!(err, TargetError::NoMatchingTarget);
    assert_eq!(err.reject_reason(), CommandRejectReason::NoMatchingTarget);
}

#[test]
fn operation_level_decides_which_selectors_are_valid() {
    let reg = registry();
    // Edge-level operations: empty and `*` both mean the Edge.
    assert_eq!(
        resolve_target(&reg, "", TargetLevel::Edge),
        Ok(Target::Edge)
    );
    assert_eq!(
        resolve_target(&reg, "*", TargetLevel::Edge),
        Ok(Target::Edge)
    );
    assert_eq!(
        resolve_target(&NodeRegistry::new(), "*", TargetLevel::Edge),
        Ok(Target::Edge)
    );
    for wrong in ["node:n1", "label:zone=a", "provider:n1/cli", "node:n9"] {
        let err = resolve_target(&reg, wrong, TargetLevel::Edge).expect_err(wrong);
        assert_eq!(
            err,
            TargetError::WrongLevel {
                level: TargetLevel::Edge
            }
        );
        assert_eq!(err.reject_reason(), CommandRejectReason::InvalidSelector);
    }
    // Node-level operations: the empty selector is the wrong level.
    let err = resolve_target(&reg, "", TargetLevel::Node).expect_err("empty");
    assert_eq!(err.reject_reason(), CommandRejectReason::InvalidSelector);
    assert_eq!(
        resolve_target(&reg, "*", TargetLevel::Node),
        Ok(nodes(&["n1", "n2", "n3"]))
    );
    let err = resolve_target(&reg, "node:n9", TargetLevel::Node).expect_err("missing");
    assert_eq!(err.reject_reason(), CommandRejectReason::NoMatchingTarget);
    let err = resolve_target(&reg, "node:", TargetLevel::Node).expect_err("malformed");
    assert!(matches!(
        err,
        TargetError::Invalid(SelectorError::InvalidNodeId(_))
    ));
    assert_eq!(err.reject_reason(), CommandRejectReason::InvalidSelector);
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 512,
            failure_persistence: Some(Box::new(
                proptest::test_runner::FileFailurePersistence::Direct(
                    "proptest-regressions/registry_selector.txt",
                ),
            )),
            ..ProptestConfig::default()
        })]

        /// Any string parses or fails with a typed error, never panics; a parsed node
        /// selector round-trips through its text form.
        #[test]
        fn any_input_parses_or_fails_cleanly(s in "(node:|provider:|label:|\\*)?[ -~\u{e9}]{0,20}") {
            let reg = registry();
            if let Ok(Selector::Node(id)) = Selector::parse(&s) {
                prop_assert_eq!(format!("node:{id}"), s.clone());
            }
            for level in [TargetLevel::Edge, TargetLevel::Node] {
                if let Err(e) = resolve_target(&reg, &s, level) {
                    prop_assert!(matches!(
                        e.reject_reason(),
                        CommandRejectReason::InvalidSelector | CommandRejectReason::NoMatchingTarget
                    ));
                }
            }
        }
    }
}
