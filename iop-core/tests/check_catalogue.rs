//! The check catalogue (PROTOCOL.md §11, `iop_proto::checks`) against this
//! implementation: every protocol violation either end raises names a protocol-error
//! check of its side, every such check is raised by one, and every counter a check
//! names is a field of that side's stats.
use iop_core::checks::{CONTROL_PLANE, Check, Checker, EDGE, Outcome, all};
use iop_core::cp::{CommandOrderRule, ProtocolViolation as CpViolation};
use iop_core::edge::ProtocolViolation as EdgeViolation;
use iop_core::proto::{BodyKind, FrameError, LimitError};

/// A body of one byte whose wire type (7) does not exist.
fn undecodable() -> FrameError {
    let mut input: &[u8] = &[0, 0, 0, 1, 0x0f];
    let err = iop_core::proto::FrameDecoder::new(1024)
        .decode(&mut input)
        .unwrap_err();
    assert!(matches!(err, FrameError::Undecodable(_)), "{err:?}");
    err
}

fn frame_errors() -> Vec<FrameError> {
    vec![
        FrameError::ZeroLength,
        FrameError::TooLarge { len: 2, max: 1 },
        undecodable(),
        FrameError::LimitExceeded(LimitError::TooDeep { limit: 16 }),
    ]
}

/// One of each variant (`rule`'s exhaustive match keeps the mapping complete;
/// this list, that every protocol-error check is reachable).
fn cp_violations() -> Vec<CpViolation> {
    let id = || "c".to_owned();
    let mut v: Vec<CpViolation> = frame_errors().into_iter().map(CpViolation::Frame).collect();
    v.extend([
        CpViolation::BeforeHello(BodyKind::Heartbeat),
        CpViolation::SecondHello,
        CpViolation::WrongDirection(BodyKind::StatusRequest),
        CpViolation::NeverIssuedCorrelationId(9),
        CpViolation::StatusEdgeIdMismatch,
        CpViolation::NodeEventEdgeIdMismatch,
        CpViolation::NodeEventSequence { last: 1, got: 1 },
        CpViolation::UnsolicitedCommandResponse { command_id: id() },
        CpViolation::ContradictoryCommandResponse { command_id: id() },
        CpViolation::CommandEventBeforeResponse { command_id: id() },
        CpViolation::CommandEventAfterRejection { command_id: id() },
        CpViolation::LoadUpdateNotNegotiated,
        CpViolation::LoadUpdateBeforeStatus,
        CpViolation::LoadUpdateRate,
        CpViolation::LoadUpdateDuplicateProvider {
            node_id: id(),
            provider_id: id(),
        },
    ]);
    for rule in [
        CommandOrderRule::SequenceOrder,
        CommandOrderRule::FirstNotAccepted,
        CommandOrderRule::UnknownPhase,
        CommandOrderRule::PhaseBackwards,
        CommandOrderRule::AfterTerminal,
    ] {
        v.push(CpViolation::CommandEventOrder {
            command_id: id(),
            rule,
        });
    }
    v
}

fn edge_violations() -> Vec<EdgeViolation> {
    let mut v: Vec<EdgeViolation> = frame_errors()
        .into_iter()
        .map(EdgeViolation::Frame)
        .collect();
    v.extend([
        EdgeViolation::Unexpected(BodyKind::StatusResponse),
        EdgeViolation::BeforeHelloAnswer(BodyKind::StatusRequest),
        EdgeViolation::EmptyBeforeHello,
        EdgeViolation::ProtocolVersion(2),
        EdgeViolation::FrameLimitTooSmall(1),
    ]);
    v
}

/// Every rule a violation names is a protocol-error check of its side, and every
/// protocol-error check of a side is named by one of its violations.
fn agree(checks: &[Check], rules: &[&'static str]) {
    for rule in rules {
        let check = checks
            .iter()
            .find(|c| c.id == *rule)
            .unwrap_or_else(|| panic!("{rule} is not in the catalogue"));
        assert_eq!(check.outcome, Outcome::ProtocolError, "{rule}");
    }
    for c in checks
        .iter()
        .filter(|c| c.outcome == Outcome::ProtocolError)
    {
        assert!(rules.contains(&c.id), "no violation reports {}", c.id);
    }
}

#[test]
fn every_violation_is_a_check_and_every_protocol_error_a_violation() {
    let cp: Vec<_> = cp_violations().iter().map(CpViolation::rule).collect();
    agree(CONTROL_PLANE, &cp);
    let edge: Vec<_> = edge_violations().iter().map(EdgeViolation::rule).collect();
    agree(EDGE, &edge);
}

#[test]
fn every_counter_is_a_stats_field() {
    let cp = format!("{:?}", iop_core::cp::CpStats::default());
    let edge = format!("{:?}", iop_core::edge::EdgeStats::default());
    for c in all() {
        if let Some(counter) = c.counter {
            let stats = match c.checker {
                Checker::ControlPlane => &cp,
                Checker::Edge => &edge,
            };
            assert!(
                stats.contains(&format!(" {counter}: ")),
                "{}: no stats field {counter}",
                c.id
            );
        }
    }
}
