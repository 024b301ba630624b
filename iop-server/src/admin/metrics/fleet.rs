//! The fleet's load in `/metrics`: its totals by category, model and label always;
//! each Edge's totals and each provider's numbers while they fit the series cap
//! (`--metrics-max-series`, 50 000 by default). Past the cap the per-provider series
//! go first, then the per-Edge ones, and `iop_metrics_fleet_detail` says what is left.

use iop_tokio::fleet::{FleetLoad, LastOnline, LoadTotals, LoadView};
use prometheus_client::encoding::DescriptorEncoder;

use super::encode::{Text, gauge, gauges};
use crate::admin::views::json::category_name;

/// Series each provider adds at the per-provider level.
const PROVIDER_SERIES: usize = 9;
/// Series each Edge adds at the per-Edge level.
const EDGE_SERIES: usize = 4;

/// A family of the totals: its name, help and how it reads them.
type Number = (&'static str, &'static str, fn(&LoadTotals) -> u64);

/// How much of the fleet a scrape shows, per the series cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Detail {
    /// Totals by category, model and label.
    Fleet = 0,
    /// And each Edge's totals.
    Edge = 1,
    /// And each provider's numbers and each node's state.
    Provider = 2,
}

/// The detail that fits `max_series`, and the series it leaves out.
pub(super) fn detail(loads: &[LoadView], max_series: usize) -> (Detail, usize) {
    let edge = loads.len() * EDGE_SERIES;
    let provider: usize = loads
        .iter()
        .filter(|l| l.live())
        .map(|l| l.load().providers().len() * PROVIDER_SERIES + l.load().nodes().len())
        .sum();
    if edge + provider <= max_series {
        (Detail::Provider, 0)
    } else if edge <= max_series {
        (Detail::Edge, provider)
    } else {
        (Detail::Fleet, edge + provider)
    }
}

/// Encodes the fleet's series.
pub(super) fn encode(
    e: &mut DescriptorEncoder<'_>,
    fleet: &FleetLoad,
    loads: &[LoadView],
    max_series: usize,
) -> Result<(), std::fmt::Error> {
    encode_totals(e, fleet)?;
    let (detail, dropped) = detail(loads, max_series);
    gauge(
        e,
        "iop_metrics_fleet_detail",
        "How much of the fleet /metrics shows under --metrics-max-series: 2 every provider and node, 1 each Edge's totals only, 0 the fleet's totals only.",
        detail as u8,
    )?;
    gauge(
        e,
        "iop_metrics_series_dropped",
        "Per-Edge and per-provider series left out to keep under --metrics-max-series.",
        dropped,
    )?;
    if detail >= Detail::Edge {
        encode_edges(e, loads)?;
    }
    if detail == Detail::Provider {
        encode_providers(e, loads)?;
    }
    Ok(())
}

/// One family per number, a series per group: `(labels, totals)`.
fn by_group<L: prometheus_client::encoding::EncodeLabelSet + Clone>(
    e: &mut DescriptorEncoder<'_>,
    prefix: &str,
    what: &str,
    groups: &[(L, &LoadTotals)],
) -> Result<(), std::fmt::Error> {
    let numbers: [Number; 8] = [
        ("capacity", "Capacity of the online providers", |t| {
            t.capacity
        }),
        ("in_flight", "Leases held", |t| t.in_flight),
        ("queued", "Requests queued", |t| t.queued),
        (
            "long_context_capacity",
            "Long-context capacity of the online providers",
            |t| t.long_context_capacity,
        ),
        ("long_context_in_flight", "Long-context leases held", |t| {
            t.long_context_in_flight
        }),
        ("long_context_queued", "Long-context requests queued", |t| {
            t.long_context_queued
        }),
        (
            "available",
            "Room for new work on the admission-eligible providers",
            |t| t.available,
        ),
        (
            "offline_capacity",
            "Capacity the offline providers last reported while online",
            |t| t.offline_capacity,
        ),
    ];
    for (name, help, read) in numbers {
        gauges(
            e,
            &format!("{prefix}_{name}"),
            &format!("{help}, {what}."),
            groups.iter().map(|(l, t)| (l.clone(), read(t))),
        )?;
    }
    Ok(())
}

fn encode_totals(e: &mut DescriptorEncoder<'_>, fleet: &FleetLoad) -> Result<(), std::fmt::Error> {
    let categories: Vec<([(&str, &str); 1], &LoadTotals)> = fleet
        .by_category()
        .map(|(c, t)| ([("category", category_name(c))], t))
        .collect();
    by_group(e, "iop_fleet", "by provider category", &categories)?;
    gauges(
        e,
        "iop_fleet_providers",
        "Providers, by category and whether offline now.",
        fleet.by_category().flat_map(|(c, t)| {
            let c = category_name(c);
            [
                (
                    [("category", c), ("offline", "false")],
                    t.providers - t.providers_offline,
                ),
                ([("category", c), ("offline", "true")], t.providers_offline),
            ]
        }),
    )?;
    let models: Vec<([(&str, Text<'_>); 1], &LoadTotals)> = fleet
        .by_model()
        .map(|(m, t)| ([("model", Text(m))], t))
        .collect();
    by_group(e, "iop_fleet_model", "by model", &models)?;
    let labels: Vec<([(&str, Text<'_>); 2], &LoadTotals)> = fleet
        .by_label()
        .map(|(k, v, t)| ([("label", Text(k)), ("value", Text(v))], t))
        .collect();
    by_group(e, "iop_fleet_label", "by node label", &labels)?;
    let n = fleet.nodes();
    gauges(
        e,
        "iop_fleet_nodes",
        "Nodes of the connected Edges, by state.",
        [
            ("configured", n.configured),
            ("pending", n.pending),
            ("ready", n.ready),
            ("disconnected", n.disconnected),
            ("other", n.other),
        ]
        .map(|(state, count)| ([("state", state)], count)),
    )?;
    gauges(
        e,
        "iop_fleet_edges",
        "Edges counted in the fleet's load: live (connected) or offline (disconnected, at their last capacity).",
        [
            ([("counted", "live")], fleet.edges_live()),
            ([("counted", "offline")], fleet.edges_offline()),
        ],
    )
}

fn encode_edges(e: &mut DescriptorEncoder<'_>, loads: &[LoadView]) -> Result<(), std::fmt::Error> {
    let totals: Vec<(&str, LoadTotals)> = loads
        .iter()
        .map(|l| (l.load().edge_id(), l.counted_totals()))
        .collect();
    let numbers: [Number; EDGE_SERIES] = [
        (
            "iop_edge_capacity",
            "Capacity of an Edge's online providers.",
            |t| t.capacity,
        ),
        (
            "iop_edge_in_flight",
            "Leases an Edge's providers hold.",
            |t| t.in_flight,
        ),
        ("iop_edge_queued", "Requests an Edge has queued.", |t| {
            t.queued
        }),
        (
            "iop_edge_offline_capacity",
            "Capacity an Edge's offline providers last reported online.",
            |t| t.offline_capacity,
        ),
    ];
    for (name, help, read) in numbers {
        gauges(
            e,
            name,
            help,
            totals.iter().map(|(id, t)| ([("edge", Text(id))], read(t))),
        )?;
    }
    Ok(())
}

fn encode_providers(
    e: &mut DescriptorEncoder<'_>,
    loads: &[LoadView],
) -> Result<(), std::fmt::Error> {
    type Read = fn(&iop_core::cp::load::ProviderLoad<'_>, Option<LastOnline>) -> u64;
    let numbers: [(&str, &str, Read); PROVIDER_SERIES] = [
        (
            "iop_provider_capacity",
            "A provider's capacity (0 while offline).",
            |p, _| p.capacity().into(),
        ),
        (
            "iop_provider_in_flight",
            "A provider's leases held.",
            |p, _| p.in_flight().into(),
        ),
        (
            "iop_provider_queued",
            "Requests queued listing a provider.",
            |p, _| p.queued().into(),
        ),
        (
            "iop_provider_long_context_capacity",
            "A provider's long-context capacity.",
            |p, _| p.long_context_capacity().into(),
        ),
        (
            "iop_provider_long_context_in_flight",
            "A provider's long-context leases held.",
            |p, _| p.long_context_in_flight().into(),
        ),
        (
            "iop_provider_long_context_queued",
            "Long-context requests queued listing a provider.",
            |p, _| p.long_context_queued().into(),
        ),
        (
            "iop_provider_admission_eligible",
            "1 while a provider is admission-eligible.",
            |p, _| u64::from(p.admission_eligible()),
        ),
        (
            "iop_provider_up",
            "1 while a provider is online.",
            |p, _| u64::from(!p.is_offline()),
        ),
        (
            "iop_provider_last_online_capacity",
            "The capacity a provider last reported while online (kept by the control plane).",
            |_, last| last.map_or(0, |o| o.capacity.into()),
        ),
    ];
    let live: Vec<&LoadView> = loads.iter().filter(|l| l.live()).collect();
    for (name, help, read) in numbers {
        gauges(
            e,
            name,
            help,
            live.iter().flat_map(|l| {
                let load = l.load();
                let edge = load.edge_id();
                load.nodes().flat_map(move |n| {
                    let node = n.node_id();
                    n.provider_indexes().zip(n.providers()).map(move |(i, p)| {
                        let labels = [
                            ("edge", Text(edge)),
                            ("node", Text(node)),
                            ("provider", Text(p.provider_id())),
                            ("category", Text(category_name(p.category()))),
                        ];
                        (labels, read(&p, l.last_online(i)))
                    })
                })
            }),
        )?;
    }
    gauges(
        e,
        "iop_node_state",
        "1 for a node's current state (configured, pending, ready, disconnected).",
        live.iter().flat_map(|l| {
            let edge = l.load().edge_id();
            l.load().nodes().map(move |n| {
                let state = match n.state() {
                    iop_core::proto::NodeState::Configured => "configured",
                    iop_core::proto::NodeState::Pending => "pending",
                    iop_core::proto::NodeState::Ready => "ready",
                    iop_core::proto::NodeState::Disconnected => "disconnected",
                    _ => "other",
                };
                (
                    [
                        ("edge", Text(edge)),
                        ("node", Text(n.node_id())),
                        ("state", Text(state)),
                    ],
                    1,
                )
            })
        }),
    )
}
