//! Placements in `/metrics`: how many, how many found nothing, the providers left out as
//! stale, and the age of the first candidate's numbers at each placement.

use iop_tokio::fleet::PlacementStats;
use iop_tokio::fleet::placement::AGE_BUCKETS_MS;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

use super::encode::counter;

/// Encodes the placement series.
pub(super) fn encode(
    e: &mut DescriptorEncoder<'_>,
    s: &PlacementStats,
) -> Result<(), std::fmt::Error> {
    counter(
        e,
        "iop_placements",
        "Placements answered (GET and POST /v1/placement).",
        s.placements,
    )?;
    counter(
        e,
        "iop_placement_reservations",
        "Reserving placements that counted their pick as one more request in flight.",
        s.reservations,
    )?;
    counter(
        e,
        "iop_placement_reservations_elsewhere",
        "Reservations other replicas placed and told, counted here as requests in flight.",
        s.reservations_elsewhere,
    )?;
    counter(
        e,
        "iop_placement_reservations_unshared",
        "Reservations placed here that other replicas were not told (too many waiting).",
        s.reservations_unshared,
    )?;
    counter(
        e,
        "iop_placements_empty",
        "Placements that found no candidate.",
        s.empty,
    )?;
    counter(
        e,
        "iop_placement_stale_excluded",
        "Providers left out of placements because their numbers were stale, summed over placements.",
        s.stale_excluded,
    )?;
    let mut m = e.encode_descriptor(
        "iop_placement_age_seconds",
        "The age of the first candidate's numbers at each placement that had one.",
        None,
        MetricType::Histogram,
    )?;
    let buckets: Vec<(f64, u64)> = AGE_BUCKETS_MS
        .iter()
        .map(|ms| *ms as f64 / 1000.0)
        .chain([f64::MAX])
        .zip(s.age_ms_buckets)
        .collect();
    let count = s.age_ms_buckets.iter().sum();
    m.encode_histogram::<NoLabelSet>(s.age_ms_sum as f64 / 1000.0, count, &buckets, None)
}
