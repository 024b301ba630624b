//! How a command ends without its Edge's own word: [`Ending`], defined once for every
//! layer — the core's [`CpEvent::CommandEnded`](super::CpEvent::CommandEnded) and
//! [`CommandOutcome::Ended`](super::CommandOutcome::Ended), a driver's tracker, a
//! cluster's routed error, an admin API's answer — each with one stable
//! [`code`](Ending::code). A new ending is a variant here (and its HTTP status where a
//! server maps codes to statuses); nothing matches an ending by its text.

use std::fmt;
use std::time::Duration;

/// A command's end that is the Control Plane's verdict (or its journal's), not an
/// Edge's terminal phase: FAILED whatever the Edge last said, and never sent again.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ending {
    /// The Edge came back without the command it had taken (it restarted): lost by
    /// the Edge (PROTOCOL.md §4.4).
    Lost,
    /// Its request went out on `sessions` sessions that each ended without an answer
    /// (an Edge that cannot take it, say): "undeliverable" (PROTOCOL.md §4.4).
    Undeliverable {
        /// Sessions that ended without answering it.
        sessions: u32,
        /// The ids of those sessions this Control Plane saw end, oldest first (fewer
        /// than `sessions` when another Control Plane carried it before, none when
        /// read back from a record).
        session_ids: Vec<u64>,
    },
    /// Its Edge stayed disconnected longer than it remembers a command (the command's
    /// timeout, then its finished-id retention): its outcome can never be learned.
    Abandoned {
        /// How long the Edge had been disconnected (zero when read back from a
        /// record).
        disconnected_for: Duration,
    },
    /// The Control Plane forgot its Edge (disconnected too long, too many
    /// disconnected Edges, or the application asked) before it finished.
    Forgotten,
    /// Its record could not be written before it was sent (a cluster's engine, the
    /// journal of PROTOCOL.md §8): it was never sent.
    Unrecorded {
        /// What the journal said (empty when read back from a record).
        reason: String,
    },
    /// The journal holds another command under its id (another Edge's, or other
    /// content): it was never sent.
    Conflict,
}

/// The kind of an [`Ending`], without its details: what a code, a status or a filter
/// needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum EndingKind {
    /// [`Ending::Lost`].
    Lost,
    /// [`Ending::Undeliverable`].
    Undeliverable,
    /// [`Ending::Abandoned`].
    Abandoned,
    /// [`Ending::Forgotten`].
    Forgotten,
    /// [`Ending::Unrecorded`].
    Unrecorded,
    /// [`Ending::Conflict`].
    Conflict,
}

impl EndingKind {
    /// Every kind, in declaration order.
    pub const ALL: [EndingKind; 6] = [
        EndingKind::Lost,
        EndingKind::Undeliverable,
        EndingKind::Abandoned,
        EndingKind::Forgotten,
        EndingKind::Unrecorded,
        EndingKind::Conflict,
    ];

    /// Its stable code (an admin API's error code, a routed error's).
    pub fn code(self) -> &'static str {
        match self {
            Self::Lost => "command_lost",
            Self::Undeliverable => "undeliverable",
            Self::Abandoned => "abandoned",
            Self::Forgotten => "forgotten",
            Self::Unrecorded => "engine_unavailable",
            Self::Conflict => "conflict",
        }
    }

    /// The kind whose [`code`](Self::code) is `code`.
    pub fn from_code(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.code() == code)
    }

    /// Its name as a command's record shows the outcome (`LOST`, `UNDELIVERABLE`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::Lost => "LOST",
            Self::Undeliverable => "UNDELIVERABLE",
            Self::Abandoned => "ABANDONED",
            Self::Forgotten => "FORGOTTEN",
            Self::Unrecorded => "UNRECORDED",
            Self::Conflict => "CONFLICT",
        }
    }

    /// What it means, in a sentence (for a command's record).
    pub fn meaning(self) -> &'static str {
        match self {
            Self::Lost => "the edge came back without the command: it was lost",
            Self::Undeliverable => {
                "sessions of the edge kept ending without answering the command: it is not sent again"
            }
            Self::Abandoned => {
                "the edge stayed disconnected longer than it remembers a command: \
                 its outcome can never be learned"
            }
            Self::Forgotten => "the edge was forgotten before the command finished",
            Self::Unrecorded => {
                "the command's record could not be written first: it was never sent"
            }
            Self::Conflict => "this command id already names another command: it was never sent",
        }
    }
}

impl Ending {
    /// Its kind.
    pub fn kind(&self) -> EndingKind {
        match self {
            Self::Lost => EndingKind::Lost,
            Self::Undeliverable { .. } => EndingKind::Undeliverable,
            Self::Abandoned { .. } => EndingKind::Abandoned,
            Self::Forgotten => EndingKind::Forgotten,
            Self::Unrecorded { .. } => EndingKind::Unrecorded,
            Self::Conflict => EndingKind::Conflict,
        }
    }

    /// Its stable code ([`EndingKind::code`]).
    pub fn code(&self) -> &'static str {
        self.kind().code()
    }

    /// The value a record keeps beside its kind: the sessions of an undeliverable
    /// command, else 0 ([`CommandOutcome::encode`](super::CommandOutcome::encode)).
    pub(crate) fn value(&self) -> u32 {
        match self {
            Self::Undeliverable { sessions, .. } => *sessions,
            _ => 0,
        }
    }

    /// The ending of `kind` a record kept with `value` ([`value`](Self::value)).
    pub(crate) fn read(kind: EndingKind, value: u32) -> Option<Self> {
        Some(match kind {
            EndingKind::Undeliverable => Self::Undeliverable {
                sessions: value,
                session_ids: Vec::new(),
            },
            _ if value != 0 => return None,
            EndingKind::Lost => Self::Lost,
            EndingKind::Abandoned => Self::Abandoned {
                disconnected_for: Duration::ZERO,
            },
            EndingKind::Forgotten => Self::Forgotten,
            EndingKind::Unrecorded => Self::Unrecorded {
                reason: String::new(),
            },
            EndingKind::Conflict => Self::Conflict,
        })
    }
}

/// " (7, 9)": the session ids of an undeliverable command, when known.
fn named_sessions(ids: &[u64]) -> String {
    if ids.is_empty() {
        return String::new();
    }
    let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
    format!(" ({})", ids.join(", "))
}

impl fmt::Display for Ending {
    /// The ending in words, with its details.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Lost => f.write_str("the edge reconnected without the command: it was lost"),
            Self::Undeliverable {
                sessions,
                session_ids,
            } => write!(
                f,
                "the command is undeliverable: {sessions} sessions of the edge{} ended \
                 without answering it, and it is not sent again",
                named_sessions(session_ids)
            ),
            Self::Abandoned { disconnected_for } => write!(
                f,
                "the command was abandoned: its edge has been disconnected for {} s, longer \
                 than it remembers a command, so its outcome can never be learned",
                disconnected_for.as_secs()
            ),
            Self::Forgotten => f.write_str("the edge was forgotten before the command finished"),
            Self::Unrecorded { reason } => write!(
                f,
                "the command was not sent: its record could not be written ({reason})"
            ),
            Self::Conflict => f.write_str("this command id already names another command"),
        }
    }
}

impl std::error::Error for Ending {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_read_back() {
        let mut seen = std::collections::BTreeSet::new();
        for kind in EndingKind::ALL {
            assert!(seen.insert(kind.code()), "{} twice", kind.code());
            assert_eq!(EndingKind::from_code(kind.code()), Some(kind));
            let ending = Ending::read(kind, 0).unwrap();
            assert_eq!(ending.kind(), kind);
        }
        assert_eq!(EndingKind::from_code("nope"), None);
        assert_eq!(Ending::read(EndingKind::Lost, 1), None);
        let undeliverable = Ending::Undeliverable {
            sessions: 3,
            session_ids: vec![7, 9],
        };
        assert!(undeliverable.to_string().contains("(7, 9)"));
        assert_eq!(
            Ending::read(EndingKind::Undeliverable, undeliverable.value())
                .map(|e| e.to_string().contains("3 sessions")),
            Some(true)
        );
    }
}
