//! Writing metric families: gauges and counters with escaped label values, the
//! helpers every part of a scrape uses.

use std::fmt::Write as _;

use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, EncodeLabelValue, EncodeMetric, LabelValueEncoder,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;

/// One gauge without labels.
pub(in crate::admin) fn gauge(
    e: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: impl Into<f64Or>,
) -> Result<(), std::fmt::Error> {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    match value.into() {
        f64Or::Int(v) => m.encode_gauge(&v),
        f64Or::Float(v) => m.encode_gauge(&v),
    }
}

/// A gauge's value: a count, or a measure.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy)]
pub(in crate::admin) enum f64Or {
    Int(u64),
    Float(f64),
}

impl From<u64> for f64Or {
    fn from(v: u64) -> Self {
        Self::Int(v)
    }
}

impl From<usize> for f64Or {
    fn from(v: usize) -> Self {
        Self::Int(v as u64)
    }
}

impl From<u8> for f64Or {
    fn from(v: u8) -> Self {
        Self::Int(u64::from(v))
    }
}

impl From<f64> for f64Or {
    fn from(v: f64) -> Self {
        Self::Float(v)
    }
}

/// One counter without labels, `name` without its `_total` (the encoder adds it).
pub(super) fn counter(
    e: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    let m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    ConstCounter::new(value).encode(m)
}

/// A gauge family: one series per label set.
pub(in crate::admin) fn gauges<L: EncodeLabelSet>(
    e: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, u64)>,
) -> Result<(), std::fmt::Error> {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in series {
        m.encode_family(&labels)?.encode_gauge(&value)?;
    }
    Ok(())
}

/// A label value from a peer (an Edge's ids, model names, labels): escaped as the
/// exposition format asks, so that no value can end its label or line.
#[derive(Debug, Clone, Copy)]
pub(in crate::admin) struct Text<'a>(pub(in crate::admin) &'a str);

impl EncodeLabelValue for Text<'_> {
    fn encode(&self, e: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        for c in self.0.chars() {
            match c {
                '\\' => e.write_str("\\\\")?,
                '"' => e.write_str("\\\"")?,
                '\n' => e.write_str("\\n")?,
                c => e.write_char(c)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::collector::Collector;
    use prometheus_client::registry::Registry;

    #[derive(Debug)]
    struct One(&'static str);

    impl Collector for One {
        fn encode(&self, mut e: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
            gauges(&mut e, "x", "help", [([("v", Text(self.0))], 1)])
        }
    }

    #[test]
    fn a_label_value_cannot_end_its_label_or_its_line() {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(One("a\"b\\c\nd")));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        assert!(out.contains(r#"x{v="a\"b\\c\nd"} 1"#), "{out}");
        assert_eq!(out.lines().filter(|l| l.starts_with("x{")).count(), 1);
    }
}
