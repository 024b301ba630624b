//! Frame decode/encode against plain prost on the same bytes, and
//! `NodeRegistry::encode_snapshot` against building the message and prost-encoding it.
//!
//! Run: `cargo bench -p iop-bench --bench codec`. Method: `iop_bench::compare`.
#![allow(clippy::print_stdout)]

use std::hint::black_box;

use iop_bench::compare::{CompareConfig, Comparison, compare};
use iop_bench::filter::Filter;
use iop_bench::fixtures::{
    EDGE_ID, NOW_UNIX_MS, full_status_request, registry, status_response, status_response_envelope,
    targeted_status_request,
};
use iop_bench::proto::{
    DEFAULT_MAX_FRAME_LEN, DecodeLimits, Envelope, FrameDecoder, Message, check_envelope,
    encode_frame,
};
use iop_bench::session::frame;
use iop_bench::table::{Row, Table, format_ns};
use iop_core::registry::STATUS_ENVELOPE_OVERHEAD;

/// Framing may add at most 2 %.
const FRAMING_GOAL: f64 = 1.02;

fn row(what: &str, c: &Comparison, goal: Option<f64>) -> Row {
    Row::new(
        what,
        format_ns(c.ours_ns),
        format_ns(c.baseline_ns),
        format!("{:.3} ({:.3}–{:.3})", c.ratio, c.ratio_q1, c.ratio_q3),
        goal.map_or_else(|| "—".to_owned(), |g| format!("≤ {g:.2}")),
        goal.map(|g| c.ratio <= g),
    )
}

/// Decodes every frame of `wire`, fed in `read`-byte chunks, with a decoder kept across
/// calls as a session keeps it.
fn decode_frames(decoder: &mut FrameDecoder, wire: &[u8], read: usize) -> usize {
    let mut frames = 0;
    for chunk in wire.chunks(read) {
        let mut input = chunk;
        while let Ok(Some(envelope)) = decoder.decode(&mut input) {
            black_box(envelope);
            frames += 1;
        }
    }
    frames
}

fn decode_rows(
    table: &mut Table,
    config: CompareConfig,
    filter: &Filter,
    what: &str,
    envelope: &Envelope,
) {
    if !filter.wants(&format!("decode {what}")) {
        return;
    }
    let wire = frame(envelope);
    let body = &wire[4..];
    let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
    assert_eq!(decode_frames(&mut decoder, &wire, wire.len()), 1);
    let prost = || Envelope::decode(black_box(body)).ok();

    let c = compare(
        config,
        || decode_frames(&mut decoder, black_box(&wire), wire.len()),
        prost,
    );
    table.push(row(
        &format!("decode {what} ({} B), one read", wire.len()),
        &c,
        Some(FRAMING_GOAL),
    ));

    if wire.len() > 16 * 1024 {
        let c = compare(
            config,
            || decode_frames(&mut decoder, black_box(&wire), 16 * 1024),
            prost,
        );
        table.push(row(&format!("decode {what}, 16 KiB reads"), &c, None));
    }

    // The limits pre-scan alone: the reference verdict the single-pass decoder is
    // tested against (PROTOCOL.md §7), not run per frame.
    let limits = DecodeLimits::default();
    let c = compare(
        config,
        || check_envelope(black_box(body), &limits).ok(),
        prost,
    );
    table.push(row(&format!("↳ limits pre-scan alone, {what}"), &c, None));
    // A decoder error is sticky and would make every later call return at once.
    assert!(decoder.error().is_none(), "{what}: the decoder failed");
    assert!(decoder.is_at_boundary());
}

fn encode_rows(
    table: &mut Table,
    config: CompareConfig,
    filter: &Filter,
    what: &str,
    envelope: &Envelope,
) {
    if !filter.wants(&format!("encode {what}")) {
        return;
    }
    let mut ours_buf = Vec::with_capacity(envelope.encoded_len() + 16);
    let mut prost_buf = Vec::with_capacity(envelope.encoded_len() + 16);
    let c = compare(
        config,
        || {
            ours_buf.clear();
            encode_frame(black_box(envelope), DEFAULT_MAX_FRAME_LEN, &mut ours_buf).ok()
        },
        || {
            prost_buf.clear();
            black_box(envelope).encode(&mut prost_buf).ok()
        },
    );
    table.push(row(&format!("encode {what}"), &c, Some(FRAMING_GOAL)));
}

fn main() {
    let config = CompareConfig::default();
    let filter = Filter::from_args();
    let reg = registry(1_000, 4);
    let big = status_response_envelope(&reg, 42);
    let small = full_status_request(42);
    let targeted = targeted_status_request(42);

    let mut table = Table::new(
        "Frame codec vs plain prost (same bytes)",
        "ours (median/iter)",
        "prost (median/iter)",
    );
    decode_rows(
        &mut table,
        config,
        &filter,
        "status request, all nodes",
        &small,
    );
    decode_rows(
        &mut table,
        config,
        &filter,
        "status request, 4 node ids",
        &targeted,
    );
    decode_rows(
        &mut table,
        config,
        &filter,
        "status response 1 000 nodes × 4 providers",
        &big,
    );
    encode_rows(
        &mut table,
        config,
        &filter,
        "status request, all nodes",
        &small,
    );
    encode_rows(
        &mut table,
        config,
        &filter,
        "status request, 4 node ids",
        &targeted,
    );
    encode_rows(
        &mut table,
        config,
        &filter,
        "status response 1 000 nodes × 4 providers",
        &big,
    );

    let mut snapshot = Table::new(
        "NodeRegistry::encode_snapshot vs building the message and prost-encoding it (1 000 nodes × 4 providers)",
        "encode_snapshot",
        "baseline",
    );
    println!("{table}");
    println!(
        "Ratios: median of {} per-round ratios ours/baseline (quartiles in brackets); batches of ~{:?}, order alternating every round.",
        config.rounds, config.batch
    );
    if !filter.wants("encode_snapshot") {
        return;
    }
    let budget = DEFAULT_MAX_FRAME_LEN as usize - STATUS_ENVELOPE_OVERHEAD;
    let built = status_response(&reg);
    let mut ours_buf = Vec::with_capacity(built.encoded_len());
    let mut base_buf = Vec::with_capacity(built.encoded_len());
    let c = compare(
        config,
        || {
            ours_buf.clear();
            reg.encode_snapshot(EDGE_ID, NOW_UNIX_MS, &[] as &[&str], budget, &mut ours_buf)
                .len
        },
        || {
            base_buf.clear();
            let message = reg.snapshot(EDGE_ID, NOW_UNIX_MS, &[] as &[&str], budget);
            message.encode(&mut base_buf).ok()
        },
    );
    snapshot.push(row("vs `snapshot()` + prost encode", &c, Some(1.0)));
    let c = compare(
        config,
        || {
            ours_buf.clear();
            reg.encode_snapshot(EDGE_ID, NOW_UNIX_MS, &[] as &[&str], budget, &mut ours_buf)
                .len
        },
        || {
            base_buf.clear();
            black_box(&built).encode(&mut base_buf).ok()
        },
    );
    snapshot.push(row("vs prost encode of a message already built", &c, None));
    assert_eq!(
        ours_buf, base_buf,
        "encode_snapshot and prost agree byte for byte"
    );

    println!("{snapshot}");
}
