//! [`ListedEdge`]: one Edge as the fleet's list shows it — the Control Plane's view
//! of it, the replica holding its live session, a summary of its load — and as a
//! replica tells another (`iop_proto::cluster::EdgeView`).

use iop_core::cp::{EdgeView, Reachability, StatusSummary};
use iop_core::ids::validate_id;
use iop_core::limits::{MAX_HELLO_METADATA_ENTRIES, MAX_HELLO_OPERATIONS};
use iop_core::proto::cluster;

use crate::load::{LoadSummary, LoadView};

/// One Edge of the fleet's list.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListedEdge {
    /// What the Control Plane holding (or last holding) it believes about it.
    pub view: EdgeView,
    /// The replica holding its live session, in a cluster.
    pub replica: Option<String>,
    /// A summary of its load, when it answered a full status.
    pub load: Option<LoadSummary>,
}

impl ListedEdge {
    /// `view` held by `replica` (in a cluster), with `load`'s summary.
    pub fn new(view: EdgeView, replica: Option<&str>, load: Option<&LoadView>) -> Self {
        Self {
            view,
            replica: replica.map(str::to_owned),
            load: load.map(LoadView::summary),
        }
    }

    /// The Edge as a replica tells another.
    pub fn to_message(&self) -> cluster::EdgeView {
        let v = &self.view;
        cluster::EdgeView {
            edge_id: v.edge_id.clone(),
            reachability: reachability_to(v.reachability) as i32,
            session_id: v.session_id,
            software_version: v.software_version.clone(),
            operations: v.operations.clone(),
            metadata: v.metadata.iter().cloned().collect(),
            connected_since_unix_ms: v.connected_since_unix_ms,
            last_status: v.last_status.as_ref().map(|s| cluster::StatusSummary {
                session_id: s.session_id,
                registry_revision: s.registry_revision,
                observed_at_unix_ms: s.observed_at_unix_ms,
                received_at_unix_ms: s.received_at_unix_ms,
                node_count: s.node_count as u64,
                connected_nodes: s.connected_nodes as u64,
                truncated: s.truncated,
            }),
            fresh: v.fresh,
            supersessions: v.supersessions,
            replica: self.replica.clone().unwrap_or_default(),
            load: self.load.as_ref().map(Into::into),
        }
    }

    /// The Edge another replica told ([`to_message`](Self::to_message)); `None` when
    /// its Edge id or replica id breaks the id grammar (no replica sends such). At most
    /// as many operations and metadata entries as a hello may carry are kept.
    pub fn from_message(m: cluster::EdgeView) -> Option<Self> {
        validate_id("edge id", &m.edge_id).ok()?;
        let replica = Some(m.replica).filter(|r| !r.is_empty());
        if let Some(r) = &replica {
            validate_id("replica", r).ok()?;
        }
        let reachability = reachability_from(m.reachability);
        let mut view = EdgeView::new(m.edge_id);
        view.reachability = reachability;
        view.session_id = m.session_id;
        view.software_version = m.software_version;
        view.operations = m.operations;
        view.operations.truncate(MAX_HELLO_OPERATIONS);
        view.metadata = m
            .metadata
            .into_iter()
            .take(MAX_HELLO_METADATA_ENTRIES)
            .collect();
        view.connected_since_unix_ms = m.connected_since_unix_ms;
        view.last_status = m.last_status.map(|s| {
            let mut summary = StatusSummary::default();
            summary.session_id = s.session_id;
            summary.registry_revision = s.registry_revision;
            summary.observed_at_unix_ms = s.observed_at_unix_ms;
            summary.received_at_unix_ms = s.received_at_unix_ms;
            summary.node_count = usize::try_from(s.node_count).unwrap_or(usize::MAX);
            summary.connected_nodes = usize::try_from(s.connected_nodes).unwrap_or(usize::MAX);
            summary.truncated = s.truncated;
            summary
        });
        view.fresh = m.fresh;
        view.supersessions = m.supersessions;
        Some(Self {
            view,
            replica,
            load: m.load.as_ref().map(Into::into),
        })
    }

    /// Whether a session of the Edge is live (connected or unreachable).
    pub fn connected(&self) -> bool {
        self.view.reachability != Reachability::Disconnected
    }
}

fn reachability_to(r: Reachability) -> cluster::Reachability {
    match r {
        Reachability::Connected => cluster::Reachability::Connected,
        Reachability::Unreachable => cluster::Reachability::Unreachable,
        _ => cluster::Reachability::Disconnected,
    }
}

fn reachability_from(r: i32) -> Reachability {
    match cluster::Reachability::try_from(r) {
        Ok(cluster::Reachability::Connected) => Reachability::Connected,
        Ok(cluster::Reachability::Unreachable) => Reachability::Unreachable,
        _ => Reachability::Disconnected,
    }
}

/// Which Edges a fleet listing shows: those in one of `states` (any when empty) whose
/// id, software version, metadata (keys or values) or holding replica holds `text`
/// (lower case; any when empty). One filter for the list a replica makes of its own
/// Edges and for the page it asks each other replica for ([`to_query`](Self::to_query)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EdgeFilter {
    /// The states an Edge may be in (none: any).
    pub states: Vec<Reachability>,
    /// Lower-case text the Edge must mention (empty: any).
    pub text: String,
}

/// One page of Edge views ([`EdgeFilter::page`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EdgePage {
    /// The page's views, in Edge id order.
    pub views: Vec<EdgeView>,
    /// How many views pass the filter in all (before paging).
    pub total: u64,
    /// Whether more follow the page's last view.
    pub more: bool,
}

/// The longest `text` a replica takes from another's query (longer never matches an
/// id, a version or a metadata entry within the hello's caps).
pub const MAX_FILTER_TEXT: usize = 4_096;

impl EdgeFilter {
    /// Edges in one of `states` (none: any) that mention `text` (any case).
    pub fn new(states: Vec<Reachability>, text: &str) -> Self {
        Self {
            states,
            text: text.to_lowercase(),
        }
    }

    /// Whether `view`, held live by `holder` (a replica id, in a cluster), passes.
    pub fn matches(&self, view: &EdgeView, holder: Option<&str>) -> bool {
        if !self.states.is_empty() && !self.states.contains(&view.reachability) {
            return false;
        }
        if self.text.is_empty() {
            return true;
        }
        let holds = |s: &str| s.to_lowercase().contains(&self.text);
        holds(&view.edge_id)
            || holds(&view.software_version)
            || holder.is_some_and(holds)
            || view.metadata.iter().any(|(k, v)| holds(k) || holds(v))
    }

    /// The page of `views` (in any order) after `after` in Edge id order, of at most
    /// `limit` that pass, each Edge's holding replica being `holder(view)`: only the
    /// page's views are copied, and picking it costs `O(n log limit)`.
    pub fn page<'a, 'h>(
        &self,
        views: impl Iterator<Item = &'a EdgeView>,
        after: &str,
        limit: usize,
        holder: impl Fn(&EdgeView) -> Option<&'h str>,
    ) -> EdgePage {
        struct ById<'a>(&'a EdgeView);
        impl PartialEq for ById<'_> {
            fn eq(&self, other: &Self) -> bool {
                self.0.edge_id == other.0.edge_id
            }
        }
        impl Eq for ById<'_> {}
        impl PartialOrd for ById<'_> {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }
        impl Ord for ById<'_> {
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                self.0.edge_id.cmp(&other.0.edge_id)
            }
        }
        let mut page = EdgePage::default();
        // The `limit` smallest ids after the cursor: a max-heap of them.
        let mut heap = std::collections::BinaryHeap::with_capacity(limit.min(1_024) + 1);
        for view in views.filter(|v| self.matches(v, holder(v))) {
            page.total += 1;
            if view.edge_id.as_str() <= after {
                continue;
            }
            heap.push(ById(view));
            if heap.len() > limit {
                heap.pop();
                page.more = true;
            }
        }
        page.views = (heap.into_sorted_vec().into_iter())
            .map(|v| v.0.clone())
            .collect();
        page
    }

    /// The page after `after` of at most `limit` Edges this filter passes, as a
    /// replica asks another for it.
    pub fn to_query(&self, after: &str, limit: usize) -> cluster::EdgeListQuery {
        cluster::EdgeListQuery {
            after: after.to_owned(),
            limit: u32::try_from(limit).unwrap_or(u32::MAX),
            states: self
                .states
                .iter()
                .map(|r| reachability_to(*r) as i32)
                .collect(),
            text: self.text.clone(),
        }
    }

    /// The filter and page another replica asks for: `(filter, after, limit)`, or
    /// `None` for a query no replica of this schema sends (a text past
    /// [`MAX_FILTER_TEXT`], an unknown state, an `after` that is not an Edge id).
    pub fn from_query(query: &cluster::EdgeListQuery) -> Option<(Self, &str, usize)> {
        if query.text.len() > MAX_FILTER_TEXT || query.states.len() > 3 {
            return None;
        }
        if !query.after.is_empty() && validate_id("after", &query.after).is_err() {
            return None;
        }
        let states = (query.states.iter())
            .map(|r| match cluster::Reachability::try_from(*r) {
                Ok(cluster::Reachability::Unspecified) | Err(_) => None,
                Ok(_) => Some(reachability_from(*r)),
            })
            .collect::<Option<Vec<_>>>()?;
        let filter = Self {
            states,
            text: query.text.to_lowercase(),
        };
        Some((filter, query.after.as_str(), query.limit as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_reads_back_as_it_was_asked_and_a_bad_query_is_refused() {
        let filter = EdgeFilter::new(vec![Reachability::Connected], "EU-1");
        let query = filter.to_query("edge-3", 100);
        assert_eq!(
            EdgeFilter::from_query(&query),
            Some((filter.clone(), "edge-3", 100))
        );
        let mut view = EdgeView::new("edge-9");
        view.reachability = Reachability::Connected;
        view.metadata = vec![("zone".into(), "eu-1".into())];
        assert!(filter.matches(&view, None));
        view.reachability = Reachability::Unreachable;
        assert!(!filter.matches(&view, None));
        let by_holder = EdgeFilter::new(Vec::new(), "Cp-B");
        assert!(by_holder.matches(&view, Some("cp-b")) && !by_holder.matches(&view, Some("cp-a")));
        for bad in [
            cluster::EdgeListQuery {
                after: "not an id".into(),
                ..query.clone()
            },
            cluster::EdgeListQuery {
                states: vec![0],
                ..query.clone()
            },
            cluster::EdgeListQuery {
                text: "x".repeat(MAX_FILTER_TEXT + 1),
                ..query.clone()
            },
        ] {
            assert_eq!(EdgeFilter::from_query(&bad), None);
        }
    }

    #[test]
    fn a_page_is_the_smallest_ids_after_the_cursor_that_pass() {
        let views: Vec<EdgeView> = [9, 3, 7, 1, 5, 8, 2]
            .iter()
            .map(|n| {
                let mut v = EdgeView::new(format!("edge-{n}"));
                v.reachability = match n % 2 {
                    0 => Reachability::Disconnected,
                    _ => Reachability::Connected,
                };
                v
            })
            .collect();
        let live = EdgeFilter::new(vec![Reachability::Connected], "");
        let page = live.page(views.iter(), "edge-1", 2, |_| None);
        let ids: Vec<&str> = page.views.iter().map(|v| v.edge_id.as_str()).collect();
        assert_eq!(
            (ids, page.total, page.more),
            (vec!["edge-3", "edge-5"], 5, true)
        );
        let last = live.page(views.iter(), "edge-5", 2, |_| None);
        let ids: Vec<&str> = last.views.iter().map(|v| v.edge_id.as_str()).collect();
        assert_eq!((ids, last.more), (vec!["edge-7", "edge-9"], false));
        let held = EdgeFilter::new(Vec::new(), "cp-b");
        let page = held.page(views.iter(), "", 10, |v| {
            (v.edge_id == "edge-8").then_some("cp-b")
        });
        assert_eq!(page.total, 1);
    }

    #[test]
    fn an_edge_reads_back_as_it_was_told_and_a_bad_id_is_refused() {
        let mut view = EdgeView::new("edge-1");
        view.reachability = Reachability::Unreachable;
        view.session_id = 7;
        view.operations = vec!["edge.ping".into()];
        view.metadata = vec![("zone".into(), "eu-1".into())];
        let mut summary = StatusSummary::default();
        summary.node_count = 3;
        view.last_status = Some(summary);
        let listed = ListedEdge {
            view,
            replica: Some("r1".into()),
            load: Some(LoadSummary::default()),
        };
        let back = ListedEdge::from_message(listed.to_message()).unwrap();
        assert_eq!(back, listed);
        let mut bad = listed.to_message();
        bad.edge_id = "not an id".into();
        assert!(ListedEdge::from_message(bad).is_none());
        let mut bad = listed.to_message();
        bad.replica = "a/b".into();
        assert!(ListedEdge::from_message(bad).is_none());
        let mut wide = listed.to_message();
        wide.operations = vec!["op".into(); MAX_HELLO_OPERATIONS + 1];
        let kept = ListedEdge::from_message(wide).unwrap();
        assert_eq!(kept.view.operations.len(), MAX_HELLO_OPERATIONS);
    }
}
