//! The Edge's status answers (PROTOCOL.md §4.3): one `status_response` per request,
//! from the registry's snapshot (§5) of the nodes asked for (`node_ids`, or every node
//! after `start_after_node_id`), in node-id order, with at most 10 000 nodes and
//! within the Control Plane's frame limit and decoded-size budget — fewer nodes and
//! `truncated` set otherwise.

use iop_proto::limits::send;
use iop_proto::{DecodeLimits, EdgeStatusRequest, Envelope};

use super::link::Edge;
use super::registry_seam::{EdgeRegistry, StatusScope};
use crate::Instant;
use crate::registry::STATUS_ENVELOPE_OVERHEAD;

/// Tries at writing a status response within the CP's decoded-size budget.
const STATUS_FIT_TRIES: usize = 6;

/// What one try at writing a status response came to.
enum Fit {
    Fits,
    /// The CP's decoder would find it too large to decode: try this byte budget.
    TooHeavy(usize),
    /// The registry wrote more than its budget, or what the limits refuse.
    Overshot,
}

impl<R: EdgeRegistry> Edge<R> {
    pub(super) fn handle_status_request(
        &mut self,
        now: Instant,
        correlation_id: u64,
        request: EdgeStatusRequest,
    ) {
        // Everything the registry reported before this request goes out first:
        // `handle_bytes` relayed it before decoding, and decoding changes nothing in
        // the registry.
        let unix_ms = self.config.wall_clock.unix_ms(now);
        let max = self.outbound.max_frame_len() as usize;
        let mut budget = max.saturating_sub(STATUS_ENVELOPE_OVERHEAD);
        // The envelope before its body: `correlation_id` (skipped when 0), then the
        // key of `status_response`; the response's bytes follow, written in place.
        let mut head = [0u8; 12];
        let head = iop_proto::encoding::status_response_head(correlation_id, &mut head);
        let (registry, edge_id) = (&self.registry, self.config.edge_id.as_str());
        let scope = StatusScope::of(&request);
        let checked = registry.encodes_within_limits();
        // The CP's decoder also bounds the heap a frame decodes to (PROTOCOL.md §7). A
        // registry that does not keep to the limits by construction has its bytes
        // checked with the decoder's own walk before they are queued, and a response
        // over the budget is written again with fewer nodes (each try cuts the byte
        // budget in proportion to the overshoot).
        // With load updates, what the answer holds is reported (PROTOCOL.md §4.8).
        let pushing = self.load.is_some();
        for _ in 0..STATUS_FIT_TRIES {
            let mut verdict = Fit::Fits;
            let mut answered: Option<(Vec<String>, bool)> = None;
            let queued = self.outbound.push_with(head, |out| {
                let start = out.len();
                registry.encode_snapshot(edge_id, scope, unix_ms, budget, out);
                let body = out.get(start..).unwrap_or_default();
                verdict = if body.len() > budget {
                    Fit::Overshot
                } else if checked {
                    Fit::Fits
                } else {
                    match send::status_response_heap(body) {
                        Ok(heap) if heap <= DecodeLimits::SPEC.decoded_budget(body.len()) => {
                            Fit::Fits
                        }
                        // Nine tenths of the bytes that would fit at this heap per byte.
                        Ok(heap) => {
                            let allowed = DecodeLimits::SPEC.decoded_budget(body.len()) as u128;
                            let fits = body.len() as u128 * allowed / heap as u128;
                            Fit::TooHeavy((fits * 9 / 10) as usize)
                        }
                        Err(_) => Fit::Overshot,
                    }
                };
                if pushing && matches!(verdict, Fit::Fits) {
                    answered = super::load::answer_nodes(body)
                        .map(|(nodes, t)| (nodes.into_iter().map(str::to_owned).collect(), t));
                }
                matches!(verdict, Fit::Fits)
            });
            match verdict {
                Fit::Fits => {
                    if self.sent(now, queued.map(|_| ()))
                        && let Some((nodes, truncated)) = answered
                    {
                        self.load_answered(scope, &nodes, truncated);
                    }
                    return;
                }
                Fit::TooHeavy(smaller) => {
                    self.stats.statuses_reduced += 1;
                    budget = smaller;
                }
                Fit::Overshot => break,
            }
        }
        // The registry wrote what the limits cannot carry: send no nodes rather than
        // nothing. Rare, so built as a message.
        let mut response = registry.snapshot(edge_id, scope, unix_ms, 0);
        edge_id.clone_into(&mut response.edge_id);
        response.observed_at_unix_ms = unix_ms;
        response.nodes.clear();
        response.truncated = true;
        self.stats.unsendable_frames += 1;
        self.send(now, Envelope::correlated(correlation_id, response));
    }
}
