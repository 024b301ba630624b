//! Records that never lie (PROTOCOL.md §8 "Command records"): a command its replica
//! refused — its write-ahead did not all land, or did not land in time, and the caller
//! was told it was not sent — must not stay in the engine as if it ran. The refusing
//! replica finishes its record UNRECORDED as soon as the engine answers again
//! ([`finish_unrecorded`]), and any replica that finds an orphan — a record never
//! answered nor finished, older than a write-ahead can take, that the Edge's index
//! does not list, so that no replica carries it on — finishes it the same way
//! ([`finish_orphan`]). Both are compare-and-set on the revision read: a write that
//! lands late (after its writer stopped waiting) finds the record moved on and cannot
//! reopen it, and a record some replica answered or finished is left as it is.

use std::time::Duration;

use bytes::Bytes;
use iop_driver::iop_core::proto::{EdgeCommandRequest, Message};

use super::records::{Records, Refused};
use super::{ATTEMPTS, index_key, parse_index, pointer_key, record_key};
use crate::stored::StoredCommand;

/// What finishing a record came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finish {
    /// The record is finished, or is not one to finish (answered, finished, another
    /// command's, a newer session's).
    Done,
    /// The engine did not answer: to be tried again.
    Retry,
}

/// Finishes UNRECORDED the record of `request`, a command of `edge_id` that the
/// replica holding session `session_id` did not send: written anew when there is none
/// (so that the write-ahead, landing late, cannot create it, and every replica reads
/// the command's end, not its absence), written over when it is this command never
/// answered nor finished, left otherwise; with its pointer, so that any replica finds
/// it.
pub(crate) async fn finish_unrecorded(
    records: &impl Records,
    edge_id: &str,
    request: &EdgeCommandRequest,
    session_id: u64,
) -> Finish {
    let key = record_key(edge_id, &request.command_id);
    for _ in 0..ATTEMPTS {
        let Ok(entry) = records.entry(&key).await else {
            return Finish::Retry;
        };
        let (expected, session) = match entry {
            None => (None, session_id),
            Some(e) => match e.value.as_deref() {
                // Deleted or purged: written on its revision.
                None => (Some(e.revision), session_id),
                Some(value) => match StoredCommand::decode_value(value) {
                    Some(s) if s.unsent(edge_id, request) && s.session_id <= session_id => {
                        (Some(e.revision), session_id)
                    }
                    // Answered, finished, another command, a newer session's, or no
                    // record a replica wrote: not this replica's to finish.
                    _ => return Finish::Done,
                },
            },
        };
        let value: Bytes = StoredCommand::unrecorded(edge_id, session, request.clone())
            .encode_to_vec()
            .into();
        let written = match expected {
            None => records.create(&key, value).await,
            Some(revision) => records.update(&key, value, revision).await,
        };
        match written {
            Ok(_) => return point(records, edge_id, &request.command_id).await,
            // Moved on, or perhaps landed: read again.
            Err(Refused::Moved | Refused::Failed) => {}
        }
    }
    Finish::Retry
}

/// The pointer from `command_id` to `edge_id`, so that every replica finds the
/// record: written if there is none (create-only: the first Edge to use an id keeps
/// it).
async fn point(records: &impl Records, edge_id: &str, command_id: &str) -> Finish {
    match records
        .create(&pointer_key(command_id), Bytes::from(edge_id.to_owned()))
        .await
    {
        Ok(_) | Err(Refused::Moved) => Finish::Done,
        Err(Refused::Failed) => Finish::Retry,
    }
}

/// Finishes `command_id` of `edge_id` UNRECORDED if it is an orphan: never answered
/// nor finished, written at least `min_age` ago, and not listed in the Edge's index
/// (which every sent command is listed in before it is sent). Returns the record as it
/// is now (`None`: none, or the engine did not answer).
pub(crate) async fn finish_orphan(
    records: &impl Records,
    edge_id: &str,
    command_id: &str,
    min_age: Duration,
) -> Option<StoredCommand> {
    let key = record_key(edge_id, command_id);
    let entry = records.entry(&key).await.ok()??;
    let stored = StoredCommand::decode_value(entry.value.as_deref()?)?;
    let request = stored.request.clone()?;
    if !stored.unsent(edge_id, &request) || entry.age < min_age {
        return Some(stored);
    }
    let listed = match records.entry(&index_key(edge_id)).await.ok()? {
        Some(index) => index
            .value
            .as_deref()
            .is_some_and(|v| parse_index(v).1.iter().any(|id| id == command_id)),
        None => false,
    };
    if listed {
        // Carried on by whichever replica next holds the Edge.
        return Some(stored);
    }
    tracing::info!(
        edge_id,
        command_id,
        "an orphan command record (never sent, listed by no index) is finished unrecorded"
    );
    finish_unrecorded(records, edge_id, &request, stored.session_id).await;
    let entry = records.entry(&key).await.ok()??;
    StoredCommand::decode_value(entry.value.as_deref()?)
}

#[cfg(test)]
mod tests;
