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
    /// closed record: taken over by compare-and-set on their revision).
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
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
