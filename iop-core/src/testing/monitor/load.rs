//! The Edge's rules of load updates (PROTOCOL.md §4.8), as the monitor checks them on
//! the wire: only when the hello negotiated them and after a full status answer went
//! out; within the burst of 4 and one per interval (at the time they are written);
//! at most 1 024 providers, each once; and §5 inside every update — an offline
//! provider, or one whose node is not connected, reports zeros and is not eligible.

use std::collections::BTreeMap;

use crate::proto::{Body, EdgeLoadUpdate, Envelope};

/// What the monitor knows of one connection's load updates.
#[derive(Debug, Default)]
pub(super) struct LoadTrack {
    /// The interval the CP answered, in ms (0: none).
    interval_ms: u64,
    /// A full status answer (not truncated, for every node or after a cursor) went
    /// out on this session.
    based: bool,
    /// Status requests written, by correlation id: whether each asks for every node.
    full_requests: BTreeMap<u64, bool>,
    /// When the burst is whole again (ms).
    tat: u64,
}

impl LoadTrack {
    /// Notes `envelope`, written at `at_ms`; returns what it breaks.
    pub(super) fn on_frame(
        &mut self,
        at_ms: u64,
        from_cp: bool,
        envelope: &Envelope,
    ) -> Vec<String> {
        match (&envelope.body, from_cp) {
            (Some(Body::HelloResponse(r)), true) if r.accepted => {
                *self = Self {
                    interval_ms: u64::from(r.load_update_interval_ms),
                    tat: at_ms,
                    ..Self::default()
                };
                Vec::new()
            }
            (Some(Body::StatusRequest(r)), true) => {
                self.full_requests
                    .insert(envelope.correlation_id, r.node_ids.is_empty());
                Vec::new()
            }
            (Some(Body::StatusResponse(r)), false) => {
                let full = self.full_requests.remove(&envelope.correlation_id);
                if full == Some(true) && !r.truncated {
                    self.based = true;
                }
                Vec::new()
            }
            (Some(Body::LoadUpdate(u)), false) => self.update(at_ms, u),
            _ => Vec::new(),
        }
    }

    fn update(&mut self, at_ms: u64, u: &EdgeLoadUpdate) -> Vec<String> {
        let mut broken = Vec::new();
        if self.interval_ms == 0 {
            broken.push("a load update on a session that did not negotiate them".to_owned());
        }
        if !self.based {
            broken.push("a load update before a full status answer".to_owned());
        }
        let tat = self.tat.max(at_ms);
        if tat - at_ms > self.interval_ms * 3 {
            broken.push(format!(
                "load update {} past the burst (one per {} ms)",
                u.sequence, self.interval_ms
            ));
        }
        self.tat = tat + self.interval_ms;
        if u.providers.len() > crate::limits::MAX_LOAD_UPDATE_PROVIDERS {
            broken.push(format!("{} providers in one update", u.providers.len()));
        }
        if u.resync && !u.providers.is_empty() {
            broken.push("a resync with providers".to_owned());
        }
        let mut seen = std::collections::BTreeSet::new();
        for p in &u.providers {
            if !seen.insert((p.node_id.as_str(), p.provider_id.as_str())) {
                broken.push(format!("{}/{} twice", p.node_id, p.provider_id));
            }
            if !p.keeps_zero_rule() {
                broken.push(format!(
                    "{}/{}: offline or not connected, yet numbers {:?} eligible {}",
                    p.node_id,
                    p.provider_id,
                    p.numbers(),
                    p.admission_eligible
                ));
            }
        }
        broken
    }
}
