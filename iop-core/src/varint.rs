//! Protobuf varints for the frames the core writes itself (status answers, frame
//! headers filled in place). Hand-written rather than prost's `encode_varint`, which
//! checks the buffer's capacity per byte (BENCHMARKS.md §10).

/// Bytes of `v` as a varint.
pub(crate) fn len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Appends `v` as a varint.
pub(crate) fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Writes `v` as a varint into `buf`; returns the bytes written (a prefix of `buf`).
pub(crate) fn encode(mut v: u64, buf: &mut [u8; MAX_LEN]) -> &[u8] {
    let mut n = 0;
    for slot in buf.iter_mut() {
        n += 1;
        if v < 0x80 {
            *slot = v as u8;
            break;
        }
        *slot = (v as u8 & 0x7f) | 0x80;
        v >>= 7;
    }
    buf.get(..n).unwrap_or_default()
}

/// Bytes of the longest varint (a `u64`).
pub(crate) const MAX_LEN: usize = 10;

#[cfg(test)]
mod tests {
    #[test]
    fn the_three_agree_with_prost() {
        for v in [
            0,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            let mut want = Vec::new();
            iop_proto::Message::encode(&iop_proto::HeartbeatAck { sequence: v }, &mut want)
                .unwrap();
            // The ack is key 0x08 then the varint (nothing at all for 0).
            let want = if v == 0 { vec![0] } else { want[1..].to_vec() };
            let mut put = Vec::new();
            super::put(&mut put, v);
            let mut buf = [0; super::MAX_LEN];
            assert_eq!(put, want, "{v}");
            assert_eq!(super::encode(v, &mut buf), &want[..], "{v}");
            assert_eq!(super::len(v), want.len(), "{v}");
        }
    }
}
