//! Edge ids as keys of the engine's buckets and tokens of its subjects.
//!
//! Edge ids match `[A-Za-z0-9._-]{1,128}` (PROTOCOL.md §3): a leading dot, `..` or a
//! trailing dot are valid ids, but not valid key-value keys, and a dot splits a NATS
//! subject. So every id is written with letters, digits and `-` as they are, `_` as
//! `_u` and `.` as `_d` (any other byte, which no valid id holds, as `_x` and two hex
//! digits): the mapping is one to one, and its output is both a valid key and a single
//! subject token.

/// The key of `edge_id` in the engine's buckets (also one subject token).
///
/// ```
/// use iop_cluster::key::{edge_id_of, edge_key};
///
/// assert_eq!(edge_key("edge-1"), "edge-1");
/// assert_eq!(edge_key(".a..b_c"), "_da_d_db_uc");
/// assert_eq!(edge_id_of(&edge_key(".a..b_c")).as_deref(), Some(".a..b_c"));
/// ```
pub fn edge_key(edge_id: &str) -> String {
    let mut key = String::with_capacity(edge_id.len() + 4);
    for b in edge_id.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' => key.push(b as char),
            b'_' => key.push_str("_u"),
            b'.' => key.push_str("_d"),
            other => key.push_str(&format!("_x{other:02x}")),
        }
    }
    key
}

/// The Edge id a key stands for; `None` for a string [`edge_key`] never writes.
pub fn edge_id_of(key: &str) -> Option<String> {
    let mut out = Vec::with_capacity(key.len());
    let mut bytes = key.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' => out.push(b),
            b'_' => match bytes.next()? {
                b'u' => out.push(b'_'),
                b'd' => out.push(b'.'),
                b'x' => {
                    let hex = [bytes.next()?, bytes.next()?];
                    let hex = std::str::from_utf8(&hex).ok()?;
                    let byte = u8::from_str_radix(hex, 16).ok()?;
                    if matches!(byte, b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.')
                    {
                        return None;
                    }
                    out.push(byte);
                }
                _ => return None,
            },
            _ => return None,
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What NATS accepts as a key-value key, and as one subject token.
    fn valid_key(key: &str) -> bool {
        !key.is_empty()
            && !key.starts_with('.')
            && !key.ends_with('.')
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'/' | b'=' | b'.'))
    }

    #[test]
    fn every_id_maps_to_one_valid_key_and_back() {
        let ids = [
            "edge-1", ".", "..", "a.", ".a", "a..b", "_", "__", "_u", "_d", "A_b.C-9", "x_x2e",
        ];
        let mut keys = std::collections::BTreeSet::new();
        for id in ids {
            let key = edge_key(id);
            assert!(valid_key(&key) && !key.contains('.'), "{id} -> {key}");
            assert_eq!(edge_id_of(&key).as_deref(), Some(id), "{key}");
            assert!(keys.insert(key), "{id}: two ids share a key");
        }
        let long = "a.".repeat(64);
        assert!(valid_key(&edge_key(&long)));
        for bad in ["_", "_z", "_x4", "_x2e", "a.b", "a b"] {
            assert_eq!(edge_id_of(bad), None, "{bad}");
        }
    }
}
