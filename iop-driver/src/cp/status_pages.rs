//! Status round trips for the application ([`ControlPlaneHandle::request_status`]):
//! one request per page, the pages merged into one answer (PROTOCOL.md §4.3).

use std::task::Poll;

use iop_core::proto::EdgeStatusResponse;

use super::error::StatusRequestError;
use super::handle::ControlPlaneHandle;
use super::status_wait::StatusReply;
use crate::Runtime;

/// Requests a named-node status may add to its pages for nodes an answer left out.
const MAX_EXTRA_PAGES: usize = 16;

impl<R: Runtime> ControlPlaneHandle<R> {
    /// Asks `edge_id` for the status of `node_ids` (empty = every node) and waits for
    /// the answer, at most the core's `status_timeout` per request.
    ///
    /// An Edge answers at most 10 000 nodes per status, in id order, and fewer when
    /// they would not fit a frame (PROTOCOL.md §4.3); the answer is paged into one
    /// response in id order. Every node: each next page is asked for after the last
    /// node id received (`start_after_node_id`), at most the core's
    /// `max_status_pages`; an Edge that ignores the field, answering from its first
    /// node again, ends the paging. Named nodes: more than 10 000 ids go out as
    /// several requests, and the ids an answer left out are asked for again, until
    /// every named node came or a page brought none (at most `ceil(n / 10 000) + 16`
    /// requests). Either way `truncated` on the result means it is partial.
    pub async fn request_status(
        &self,
        edge_id: &str,
        node_ids: Vec<String>,
    ) -> Result<EdgeStatusResponse, StatusRequestError> {
        if node_ids.is_empty() {
            return self.request_every_node(edge_id).await;
        }
        let mut wanted: Vec<String> = node_ids;
        wanted.sort_unstable();
        wanted.dedup();
        let pages = wanted.len().div_ceil(iop_core::limits::MAX_NODES);
        let mut merged: Option<EdgeStatusResponse> = None;
        let mut left: &[String] = &wanted;
        let mut retry: Vec<String> = Vec::new();
        let mut stalled = false;
        for _ in 0..pages + MAX_EXTRA_PAGES {
            let page: Vec<String> = if retry.is_empty() {
                let (page, rest) = left.split_at(left.len().min(iop_core::limits::MAX_NODES));
                left = rest;
                page.to_vec()
            } else {
                std::mem::take(&mut retry)
            };
            if page.is_empty() {
                break;
            }
            let answer = self
                .request_status_page(edge_id, page.clone(), None)
                .await?;
            if answer.truncated && !answer.nodes.is_empty() {
                // Asked by name: the ones left out are known, ask for them next.
                let got: std::collections::BTreeSet<&str> =
                    answer.nodes.iter().map(|n| n.node_id.as_str()).collect();
                retry = page
                    .iter()
                    .filter(|id| !got.contains(id.as_str()))
                    .cloned()
                    .collect();
            }
            // Not even one node fits a frame: asking again would bring nothing.
            stalled = answer.truncated && answer.nodes.is_empty();
            merged = Some(match merged {
                None => answer,
                Some(mut m) => {
                    m.observed_at_unix_ms = m.observed_at_unix_ms.min(answer.observed_at_unix_ms);
                    m.registry_revision = answer.registry_revision;
                    m.nodes.extend(answer.nodes);
                    m
                }
            });
            if stalled {
                break;
            }
        }
        let mut merged = merged.unwrap_or_default();
        merged.nodes.sort_by(|a, b| a.node_id.cmp(&b.node_id));
        // Partial when a named node may be missing: a page never asked, ids left out
        // and not asked again within the bound, or a page that brought none.
        merged.truncated = stalled || !left.is_empty() || !retry.is_empty();
        Ok(merged)
    }

    /// Every node of `edge_id`, paged after the last node id of each truncated answer.
    async fn request_every_node(
        &self,
        edge_id: &str,
    ) -> Result<EdgeStatusResponse, StatusRequestError> {
        let mut merged = self.request_status_page(edge_id, Vec::new(), None).await?;
        let max_pages = self.shared.lock().cp.config().max_status_pages;
        let mut pages = 1;
        while merged.truncated && pages < max_pages {
            let Some(cursor) = merged.nodes.last().map(|n| n.node_id.clone()) else {
                // Not even one node fits a frame: asking again would bring nothing.
                break;
            };
            let page = self
                .request_status_page(edge_id, Vec::new(), Some(&cursor))
                .await?;
            pages += 1;
            if page.nodes.first().is_some_and(|n| n.node_id <= cursor) {
                // An Edge older than `start_after_node_id`: from its first node again.
                break;
            }
            merged.registry_revision = page.registry_revision;
            merged.truncated = page.truncated;
            merged.nodes.extend(page.nodes);
        }
        Ok(merged)
    }

    /// One status request: at most 10 000 node ids, or every node after `after`.
    async fn request_status_page(
        &self,
        edge_id: &str,
        node_ids: Vec<String>,
        after: Option<&str>,
    ) -> Result<EdgeStatusResponse, StatusRequestError> {
        // This task's waker, registered with the request in the same lock, so the
        // answer can never arrive unseen.
        let waker = std::future::poll_fn(|cx| Poll::Ready(cx.waker().clone())).await;
        let request = self.shared.with_direct(|state, now| {
            if state.stopped {
                return Err(StatusRequestError::Stopped);
            }
            let request = match after {
                Some(after) => state.cp.request_status_after(now, edge_id, after)?,
                None => state.cp.request_status(now, edge_id, node_ids)?,
            };
            state.status_waiters.insert(request, waker);
            Ok(request)
        })?;
        StatusReply::new(&self.shared, request).await
    }
}
