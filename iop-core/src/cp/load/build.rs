//! Assembling an [`EdgeLoad`] from the pages of one status answer (PROTOCOL.md §4.3):
//! the first page starts a [`LoadBuild`], each next one, asked for after the last node
//! id received, adds its nodes, and the last (not truncated) finishes it. A page that
//! does not start after that id comes from an Edge older than `start_after_node_id`,
//! which answered from its first node again: the build is given up, the view partial.

use iop_proto::{
    EdgeNodeSnapshot, EdgeStatusResponse, ProviderHealth, ProviderLoad as WireLoad, ProviderStatus,
};

use super::edge::{EdgeLoad, Name, NodeRec, ProviderRec, Run};

/// Distinct label and model names a build shares within an Edge (looked up by a linear
/// scan, so kept small); past it each is stored again.
const SHARED_NAMES: usize = 16;
/// Providers' load updates a build keeps for its nodes already paged in; past it the
/// build is given up (the view stays partial until the next refresh).
const MAX_LATER_UPDATES: usize = 16 * 1024;

/// Why a page could not be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PageRefused {
    /// Its nodes do not start after the cursor (an Edge that ignores
    /// `start_after_node_id`), or are not in id order.
    NotAfterCursor,
    /// The view would pass the pages a view may take.
    TooManyPages,
}

/// An [`EdgeLoad`] being assembled from pages.
#[derive(Debug)]
pub(crate) struct LoadBuild {
    edge_id: Name,
    /// The session whose answers these are.
    pub(crate) session_id: u64,
    /// The first page was asked for since the latest resync point: once complete, the
    /// view is fresh.
    pub(crate) since_resync: bool,
    names: String,
    nodes: Vec<NodeRec>,
    providers: Vec<ProviderRec>,
    labels: Vec<(Name, Name)>,
    models: Vec<Name>,
    shared: Vec<Name>,
    revision: u64,
    observed_at_unix_ms: u64,
    pages: u32,
    /// The last node id added: the next page starts after it.
    cursor: String,
    /// Every node came after the one before it (PROTOCOL.md §4.3: node-id order).
    in_order: bool,
    /// Load updates (PROTOCOL.md §4.8) that came between pages for nodes already paged
    /// in: newer than their page, applied to the view once it is whole.
    later: Vec<WireLoad>,
}

impl LoadBuild {
    /// A build whose first page is `first`.
    pub(crate) fn start(first: &EdgeStatusResponse, session_id: u64, since_resync: bool) -> Self {
        let mut build = Self {
            edge_id: Name::default(),
            session_id,
            since_resync,
            names: String::new(),
            nodes: Vec::with_capacity(first.nodes.len()),
            providers: Vec::new(),
            labels: Vec::new(),
            models: Vec::new(),
            shared: Vec::new(),
            revision: first.registry_revision,
            observed_at_unix_ms: first.observed_at_unix_ms,
            pages: 1,
            cursor: String::new(),
            in_order: true,
            later: Vec::new(),
        };
        build.edge_id = build.name(&first.edge_id);
        for node in &first.nodes {
            build.add_node(node);
        }
        build
    }

    /// The nodes so far came in id order: a next page can start after the last.
    pub(crate) fn in_order(&self) -> bool {
        self.in_order
    }

    /// The node id the next page must start after.
    pub(crate) fn cursor(&self) -> &str {
        &self.cursor
    }

    /// Keeps what of a load update, come between pages, concerns nodes already paged
    /// in (a later page brings the others, newer); false past [`MAX_LATER_UPDATES`].
    pub(crate) fn note_update(&mut self, loads: &[WireLoad]) -> bool {
        let paged = loads
            .iter()
            .filter(|l| l.node_id.as_str() <= self.cursor.as_str());
        self.later.extend(paged.cloned());
        self.later.len() <= MAX_LATER_UPDATES
    }

    /// Adds the next page, asked for after [`cursor`](Self::cursor); at most
    /// `max_pages` pages in all.
    pub(crate) fn append(
        &mut self,
        page: &EdgeStatusResponse,
        max_pages: u32,
    ) -> Result<(), PageRefused> {
        if self.pages >= max_pages {
            return Err(PageRefused::TooManyPages);
        }
        if page
            .nodes
            .first()
            .is_some_and(|n| n.node_id.as_str() <= self.cursor.as_str())
        {
            return Err(PageRefused::NotAfterCursor);
        }
        for node in &page.nodes {
            self.add_node(node);
        }
        self.pages += 1;
        if self.in_order {
            Ok(())
        } else {
            Err(PageRefused::NotAfterCursor)
        }
    }

    fn add_node(&mut self, node: &EdgeNodeSnapshot) {
        if !self.nodes.is_empty() && node.node_id.as_str() <= self.cursor.as_str() {
            self.in_order = false;
        }
        node.node_id.clone_into(&mut self.cursor);
        let id = self.name(&node.node_id);
        let labels_at = self.labels.len();
        for (k, v) in &node.labels {
            let pair = (self.shared_name(k), self.shared_name(v));
            self.labels.push(pair);
        }
        let providers_at = self.providers.len();
        for p in &node.provider_snapshots {
            let id = self.name(&p.provider_id);
            let models_at = self.models.len();
            for m in &p.models {
                let m = self.shared_name(m);
                self.models.push(m);
            }
            let offline = p.health == ProviderHealth::Offline as i32
                || p.status == ProviderStatus::Unavailable as i32;
            self.providers.push(ProviderRec {
                id,
                models: run(models_at, self.models.len()),
                numbers: p.numbers(),
                offline,
                eligible: p.admission_eligible && !offline,
                category: small(p.category),
                status: small(p.status),
                health: small(p.health),
            });
        }
        self.nodes.push(NodeRec {
            id,
            labels: run(labels_at, self.labels.len()),
            providers: run(providers_at, self.providers.len()),
            state: node.state,
        });
    }

    fn name(&mut self, s: &str) -> Name {
        let at = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.push_str(s);
        Name {
            at,
            len: u16::try_from(s.len()).unwrap_or(u16::MAX),
        }
    }

    /// A label or model name, stored once per Edge while few are distinct.
    fn shared_name(&mut self, s: &str) -> Name {
        let names = &self.names;
        let found = self.shared.iter().find(|n| {
            let at = n.at as usize;
            names.get(at..at + usize::from(n.len)) == Some(s)
        });
        if let Some(n) = found {
            return *n;
        }
        let n = self.name(s);
        if self.shared.len() < SHARED_NAMES {
            self.shared.push(n);
        }
        n
    }

    /// The view, with the load updates that came between its pages applied.
    pub(crate) fn finish(mut self) -> EdgeLoad {
        let later = std::mem::take(&mut self.later);
        let mut view = self.assemble();
        view.apply(&later);
        view
    }

    fn assemble(self) -> EdgeLoad {
        let mut nodes = self.nodes;
        if !self.in_order {
            // One page out of order (a careless Edge): kept, sorted for lookups.
            let names = &self.names;
            nodes.sort_by(|a, b| name_in(names, a.id).cmp(name_in(names, b.id)));
        }
        EdgeLoad {
            edge_id: self.edge_id,
            names: self.names.into(),
            nodes: nodes.into_boxed_slice(),
            providers: self.providers.into_boxed_slice(),
            labels: self.labels.into(),
            models: self.models.into(),
            revision: self.revision,
            observed_at_unix_ms: self.observed_at_unix_ms,
            pages: self.pages,
        }
    }
}

fn name_in(names: &str, name: Name) -> &str {
    let at = name.at as usize;
    names
        .get(at..at + usize::from(name.len))
        .unwrap_or_default()
}

fn run(from: usize, to: usize) -> Run {
    Run {
        at: u32::try_from(from).unwrap_or(u32::MAX),
        len: u32::try_from(to - from).unwrap_or(0),
    }
}

/// An enum's wire value in a byte (the values of §3 are small; others read as 255 and
/// then as unspecified).
fn small(v: i32) -> u8 {
    u8::try_from(v).unwrap_or(u8::MAX)
}

impl EdgeLoad {
    /// A view of `status` (one answer holding every node), assembled from `pages`
    /// pages: what [`to_status`](Self::to_status) wrote.
    pub fn from_status(status: &EdgeStatusResponse, pages: u32) -> Self {
        let mut load = LoadBuild::start(status, 0, false).finish();
        load.pages = pages;
        load
    }
}
