//! Inputs the fuzz targets (`fuzz/`) found, replayed as ordinary tests.
//!
//! Each test names the target that found the input and states the property it broke.
//! The counting allocator is process-wide, so every test of this file holds `SERIAL`
//! while it runs: no other test thread allocates during a measurement.

mod counting;

use std::sync::{Mutex, MutexGuard};

use counting::allocated;
use iop_proto::*;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `envelope_roundtrip`: a body whose `hello_response` announces 32 bytes but holds
/// 10. The pre-scan stops at the truncation and estimated 0 bytes, yet prost allocated
/// 200 bytes for the `DecodeError` it returns (its box and its stack of field names).
/// `check_envelope` promises an upper bound of what decoding *or rejecting* costs.
#[test]
fn truncated_body_estimate_covers_the_decode_error() {
    let _serial = serial();
    let body = [
        0x1a, 0x20, 0x65, 0x64, 0x67, 0x65, 0x5f, 0x69, 0x64, 0x38, 0xe8, 0x07,
    ];
    let estimate = check_envelope(&body, &DecodeLimits::default()).unwrap();
    let (decoded, bytes) = allocated(|| Envelope::decode(body.as_slice()));
    assert!(decoded.is_err());
    drop(decoded);
    assert!(bytes > 0, "the error should cost something to build");
    assert!(bytes <= estimate, "allocated {bytes} > estimate {estimate}");
}

/// The same bound at the deepest nesting, where prost's error carries the longest
/// stack: a provider's model that is not UTF-8 (envelope → status response → node →
/// provider → models).
#[test]
fn deepest_decode_error_stays_within_the_estimate() {
    let _serial = serial();
    let provider = [0x5a, 0x02, 0xff, 0xfe]; // models: [0xff 0xfe], not UTF-8
    let node = [&[0x22, provider.len() as u8][..], &provider].concat();
    let status = [&[0x12, node.len() as u8][..], &node].concat();
    let body = [&[0x2a, status.len() as u8][..], &status].concat();
    let estimate = check_envelope(&body, &DecodeLimits::default()).unwrap();
    let (decoded, bytes) = allocated(|| Envelope::decode(body.as_slice()));
    let err = decoded.unwrap_err();
    assert!(err.to_string().contains("ProviderSnapshot.models"), "{err}");
    drop(err);
    assert!(bytes <= estimate, "allocated {bytes} > estimate {estimate}");
}

/// A tiny frame under a tiny budget is still accepted: the error allowance is not
/// charged to the budget.
#[test]
fn error_allowance_is_not_charged_to_the_budget() {
    let _serial = serial();
    let mut limits = DecodeLimits::default();
    limits.amplification_floor = 0;
    let mut wire = Vec::new();
    let heartbeat = Envelope::from(Heartbeat {
        sequence: 1,
        sent_at_unix_ms: 2,
    });
    encode_frame(&heartbeat, DEFAULT_MAX_FRAME_LEN, &mut wire).unwrap();
    let mut decoder = FrameDecoder::with_limits(DEFAULT_MAX_FRAME_LEN, limits);
    assert_eq!(decoder.decode(&mut wire.as_slice()), Ok(Some(heartbeat)));
}

/// `envelope_roundtrip`: a status response (`0x2a`) of declared length 166 whose
/// node runs past it. prost reads a sub-message's fields up to the end of the whole
/// body, not of their parent, so it decoded the whole node (892 bytes allocated)
/// before reporting the status response's length as exceeded; the pre-scan had cut
/// the node to the status response's bytes, stopped, and estimated 520.
#[test]
fn overrunning_node_found_by_the_fuzzer_is_estimated() {
    let _serial = serial();
    let body = hex_bytes(
        "0801123110011a05302e35656565656565656565656565656565656565650008072aa6010a06\
         656467652d311284010a066e6f64652d6110011a200a02723112056770752d3012056170692d\
         301a0c6c6c616d612d332e312d386222270a056770752d301003180120012804300238014001\
         48015a0c6c6c616d612d332e312d3862600122140a056170692d3010021803206d612d332e31\
         2d3862600122140a056170692d301002180320035a056770742d78280330033898c8656595ff\
         bc035a056770742d7828fd2f033898c8656595ffbc31420c0a047a6f6e6501220100bb00",
    );
    let estimate = check_envelope(&body, &DecodeLimits::default()).unwrap();
    let (decoded, bytes) = allocated(|| Envelope::decode(body.as_slice()));
    assert!(decoded.is_err());
    drop(decoded);
    assert!(bytes <= estimate, "allocated {bytes} > estimate {estimate}");
}

/// The same hole made hostile: a status response of declared length 3 (a node's key
/// and length) whose node, 1 000 empty providers, lies past its end. The pre-scan
/// used to stop at the overrun and accept the frame, and prost then decoded a node
/// of 1 000 providers (over the cap of 256) before failing — any cap could be
/// bypassed this way, up to the frame size. Now the scan reads on as prost does, and
/// so does the single-pass decoder, which stops at the cap.
#[test]
fn caps_hold_for_a_node_running_past_its_status_response() {
    let _serial = serial();
    let providers = [0x22, 0x00].repeat(1_000); // 1 000 empty provider snapshots
    let mut body = vec![0x2a, 0x03, 0x12, 0xd0, 0x0f]; // status (3 bytes): node of 2 000
    assert_eq!(providers.len(), 2_000);
    body.extend_from_slice(&providers);

    let (decoded, bytes) = allocated(|| Envelope::decode(body.as_slice()));
    let err = decoded.unwrap_err();
    assert!(err.to_string().contains("length"), "{err}");
    drop(err);
    assert!(
        bytes > 80_000,
        "prost decodes the whole node first: {bytes} bytes"
    );

    assert_eq!(
        check_envelope(&body, &DecodeLimits::default()),
        Err(LimitError::TooManyElements {
            field: "iop.EdgeNodeSnapshot.provider_snapshots",
            limit: 256,
        })
    );
    let mut wire = (body.len() as u32).to_be_bytes().to_vec();
    wire.extend_from_slice(&body);
    // A fresh decoder each run: its errors are sticky.
    let (result, bytes) =
        allocated(|| FrameDecoder::new(DEFAULT_MAX_FRAME_LEN).decode(&mut wire.as_slice()));
    assert!(
        matches!(result, Err(FrameError::LimitExceeded(_))),
        "{result:?}"
    );
    // Decoding stops at the 257th provider, before pushing it: what it allocated is
    // the node and its 256 providers, far less than prost's whole node.
    let cap =
        256 * std::mem::size_of::<ProviderSnapshot>() + 4 * std::mem::size_of::<EdgeNodeSnapshot>();
    assert!(bytes <= cap, "refused at the cap: {bytes} bytes > {cap}");
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    let digits: Vec<u8> = hex.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}
