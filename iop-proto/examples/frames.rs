//! Encodes a short CP ⇄ Edge conversation into one byte stream, decodes it back from
//! 7-byte reads, and prints what came out; then shows how bad input is refused.
//!
//! Run with `cargo run -p iop-proto --example frames`.
#![allow(clippy::print_stdout)] // printing is this example's job

use iop_proto::*;

fn conversation() -> Vec<Envelope> {
    vec![
        Envelope::new(EdgeHelloRequest {
            edge_id: "edge-1".into(),
            protocol_version: PROTOCOL_VERSION,
            software_version: "0.1.0".into(),
            operations: vec!["edge.ping".into(), "node.drain".into()],
            credential: b"enrolment-secret".to_vec(),
            ..Default::default()
        }),
        Envelope::new(EdgeHelloResponse {
            accepted: true,
            protocol_version: PROTOCOL_VERSION,
            heartbeat_interval_ms: 5_000,
            session_id: 1,
            ..Default::default()
        }),
        Envelope::correlated(1, EdgeStatusRequest::default()),
        Envelope::correlated(
            1,
            EdgeStatusResponse {
                edge_id: "edge-1".into(),
                nodes: vec![EdgeNodeSnapshot {
                    node_id: "node-a".into(),
                    connected: true,
                    state: NodeState::Ready as i32,
                    generation: 1,
                    ..Default::default()
                }],
                registry_revision: 4,
                ..Default::default()
            },
        ),
        Envelope::new(EdgeCommandRequest {
            command_id: "01JD7Z3Q0000000000000000AB".into(),
            operation: "edge.ping".into(),
            ..Default::default()
        }),
        Envelope::new(EdgeCommandResponse {
            command_id: "01JD7Z3Q0000000000000000AB".into(),
            accepted: true,
            ..Default::default()
        }),
        Envelope::new(EdgeCommandEvent {
            command_id: "01JD7Z3Q0000000000000000AB".into(),
            phase: CommandPhase::Succeeded as i32,
            sequence: 1,
            message: "pong".into(),
            ..Default::default()
        }),
        Envelope::new(Heartbeat {
            sequence: 1,
            sent_at_unix_ms: 1_700_000_000_000,
        }),
        Envelope::new(HeartbeatAck { sequence: 1 }),
        Envelope::go_away(GoAwayReason::Shutdown, "bye", 0),
    ]
}

/// One line about what an envelope carries.
fn summary(envelope: &Envelope) -> String {
    match &envelope.body {
        Some(Body::HelloRequest(h)) => format!(
            "edge_id={} version={} operations={:?} credential=<{} bytes, never printed>",
            h.edge_id,
            h.protocol_version,
            h.operations,
            h.credential.len()
        ),
        Some(Body::HelloResponse(r)) => format!(
            "accepted={} session_id={} heartbeat_interval_ms={}",
            r.accepted, r.session_id, r.heartbeat_interval_ms
        ),
        Some(Body::StatusRequest(r)) => format!("node_ids={:?} (empty = all)", r.node_ids),
        Some(Body::StatusResponse(r)) => format!(
            "edge_id={} nodes=[{}] revision={}",
            r.edge_id,
            r.nodes
                .iter()
                .map(|n| format!("{} {:?}", n.node_id, n.state()))
                .collect::<Vec<_>>()
                .join(", "),
            r.registry_revision
        ),
        Some(Body::CommandRequest(c)) => format!(
            "command_id={} operation={} selector={:?}",
            c.command_id, c.operation, c.target_selector
        ),
        Some(Body::CommandResponse(c)) => {
            format!("command_id={} accepted={}", c.command_id, c.accepted)
        }
        Some(Body::CommandEvent(e)) => format!(
            "command_id={} seq={} phase={:?} message={:?}",
            e.command_id,
            e.sequence,
            e.phase(),
            e.message
        ),
        Some(Body::NodeEvent(e)) => format!("seq={} kind={:?}", e.sequence, e.kind()),
        Some(Body::Heartbeat(h)) => format!("seq={} sent_at={}", h.sequence, h.sent_at_unix_ms),
        Some(Body::HeartbeatAck(a)) => format!("seq={}", a.sequence),
        Some(Body::GoAway(g)) => format!("reason={:?} message={:?}", g.reason(), g.message),
        Some(Body::LoadUpdate(u)) => format!(
            "seq={} providers={} resync={}",
            u.sequence,
            u.providers.len(),
            u.resync
        ),
        None => "(no body)".into(),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sent = conversation();
    let mut wire = Vec::new();
    for envelope in &sent {
        encode_frame(envelope, DEFAULT_MAX_FRAME_LEN, &mut wire)?;
    }
    println!(
        "encoded {} frames into {} bytes; decoding from 7-byte reads\n",
        sent.len(),
        wire.len()
    );

    let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
    let mut received = Vec::new();
    for chunk in wire.chunks(7) {
        let mut input = chunk;
        while let Some(envelope) = decoder.decode(&mut input)? {
            received.push(envelope);
        }
    }
    decoder.finish()?;

    println!(" #  body              correlation  bytes  content");
    for (i, envelope) in received.iter().enumerate() {
        println!(
            "{:>2}  {:<17} {:>11} {:>6}  {}",
            i + 1,
            envelope.kind().as_str(),
            envelope.correlation_id,
            LENGTH_PREFIX_LEN + envelope.encoded_len(),
            summary(envelope)
        );
    }
    println!(
        "\nround trip: {}",
        if received == sent {
            "identical"
        } else {
            "DIFFERENT"
        }
    );

    println!("\nbad input is refused with a typed cause:");
    let cases: [(&str, Vec<u8>, u32); 3] = [
        ("zero length", vec![0, 0, 0, 0], DEFAULT_MAX_FRAME_LEN),
        (
            "over the 256 KiB pre-hello limit (prefix only)",
            (PRE_HELLO_MAX_FRAME_LEN + 1).to_be_bytes().to_vec(),
            PRE_HELLO_MAX_FRAME_LEN,
        ),
        (
            "an edge_id of 129 bytes",
            {
                let mut bytes = Vec::new();
                let hello = EdgeHelloRequest {
                    edge_id: "e".repeat(129),
                    protocol_version: 1,
                    ..Default::default()
                };
                encode_frame(&hello.into(), DEFAULT_MAX_FRAME_LEN, &mut bytes)?;
                bytes
            },
            PRE_HELLO_MAX_FRAME_LEN,
        ),
    ];
    for (what, bytes, max) in cases {
        let mut decoder = FrameDecoder::new(max);
        match decoder.decode(&mut bytes.as_slice()) {
            Err(err) => println!("  {what}: {err}"),
            Ok(frame) => println!("  {what}: unexpectedly accepted: {frame:?}"),
        }
    }
    Ok(())
}
