//! The ownership record of one Edge id, as the engine stores it.

use serde::{Deserialize, Serialize};

/// Who holds an Edge id's live session. The record's *revision* in the bucket is that
/// session's `session_id`; a closed record is kept (with the revision of its close),
/// never deleted, so that every later claim is a compare-and-set on a known revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerRecord {
    /// The replica that wrote the record.
    pub replica: String,
    /// True while that replica's session is live; false once it closed.
    pub live: bool,
}

impl OwnerRecord {
    /// A live record of `replica`.
    pub fn live(replica: &str) -> Self {
        Self {
            replica: replica.to_owned(),
            live: true,
        }
    }

    /// A closed record of `replica`.
    pub fn closed(replica: &str) -> Self {
        Self {
            replica: replica.to_owned(),
            live: false,
        }
    }

    /// The record as stored: a small JSON document.
    pub fn encode(&self) -> bytes::Bytes {
        serde_json::to_vec(self).unwrap_or_default().into()
    }

    /// A stored record; `None` for bytes no replica wrote (they are treated as a
    /// closed record: taken over by compare-and-set on their revision): over 1 KiB,
    /// not this JSON, or naming a replica by an id the id grammar refuses.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        if bytes.len() > 1024 {
            return None;
        }
        let record: Self = serde_json::from_slice(bytes).ok()?;
        iop_driver::iop_core::ids::validate_id("replica", &record.replica).ok()?;
        Some(record)
    }
}

/// A record as read, with its revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Current {
    /// The record (`None`: unreadable, or deleted by hand).
    pub record: Option<OwnerRecord>,
    /// Its revision in the bucket.
    pub revision: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_no_replica_could_write_reads_as_none() {
        let live = OwnerRecord::live("a");
        assert_eq!(OwnerRecord::decode(&live.encode()), Some(live));
        assert_eq!(OwnerRecord::decode(br#"{"replica":"","live":true}"#), None);
        assert_eq!(
            OwnerRecord::decode(br#"{"replica":"a b","live":true}"#),
            None
        );
        let long = format!(r#"{{"replica":"{}","live":true}}"#, "a".repeat(129));
        assert_eq!(OwnerRecord::decode(long.as_bytes()), None);
        let padded = format!(r#"{{"replica":"a","live":true}}{}"#, " ".repeat(1024));
        assert_eq!(OwnerRecord::decode(padded.as_bytes()), None);
    }
}
