//! `proto/iop/limits.toml`, beside the schema, is the one limits table written for
//! other languages: every constant of PROTOCOL.md §7 and every field's caps, as
//! `iop_proto::limits` holds them. This test writes what the file must say and fails
//! when it differs; `IOP_BLESS=1 cargo test -p iop-proto --test limits_toml` rewrites
//! it after an intended change.

use std::fmt::Write as _;
use std::path::PathBuf;

use iop_proto::limits::{self, TABLE, field_caps};

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../proto/iop/limits.toml")
}

/// A TOML basic string.
fn quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The unit of a value as the table writes it: `10 s` is a duration, `4 MiB` a size.
fn unit(written: &str) -> &'static str {
    let last = written.rsplit(' ').next().unwrap_or_default();
    match last {
        "ms" | "s" | "min" | "h" => "ms",
        "B" | "KiB" | "MiB" => "bytes",
        _ => "count",
    }
}

const HEADER: &str = "\
# The caps of the IOP Control Plane <-> Edge wire (protocol version 1), PROTOCOL.md §7.
# Written from iop_proto::limits by iop-proto/tests/limits_toml.rs, which fails when
# this file and the code differ (IOP_BLESS=1 rewrites it).
#
# [limits]: every constant of PROTOCOL.md §7; `unit` is bytes, count or ms.
# [fields.\"iop.Message.field\"]: what a decoder refuses, as a protocol error, past:
#   max_bytes  bytes of a string or bytes field, of each element of a repeated one,
#              of a map key or value;
#   max_items  elements of a repeated field, entries of a map.
# A decoder also refuses a frame whose decoded heap would pass
# max(MAX_AMPLIFICATION x frame length, AMPLIFICATION_FLOOR).
# [hello]: the hello's own caps; past them a Control Plane answers INVALID_HELLO.
";

fn rendered() -> String {
    let values = limits::table_values();
    let mut out = String::from(HEADER);
    out.push_str("\n[limits]\n");
    for row in TABLE {
        let value = values
            .iter()
            .find(|(name, _)| *name == row.name)
            .map(|(_, v)| *v)
            .expect("every row has a value");
        let _ = writeln!(
            out,
            "{} = {{ value = {value}, unit = \"{}\", what = {} }}",
            row.name,
            unit(row.value),
            quoted(row.what)
        );
    }
    for cap in field_caps() {
        let _ = write!(out, "\n[fields.{}]\n", quoted(cap.field));
        if let Some(n) = cap.max_items {
            let _ = writeln!(out, "max_items = {n}");
        }
        if let Some(n) = cap.max_bytes {
            let _ = writeln!(out, "max_bytes = {n}");
        }
    }
    out.push_str("\n[hello]\n");
    for (what, n) in [
        ("operations", limits::MAX_HELLO_OPERATIONS),
        ("metadata_entries", limits::MAX_HELLO_METADATA_ENTRIES),
        ("metadata_value_bytes", limits::MAX_HELLO_METADATA_VALUE_LEN),
        ("software_version_bytes", limits::MAX_SOFTWARE_VERSION_LEN),
        ("inflight_command_ids", limits::MAX_HELLO_INFLIGHT_IDS),
    ] {
        let _ = writeln!(out, "{what} = {n}");
    }
    out
}

#[test]
fn limits_toml_is_the_one_limits_table() {
    let wanted = rendered();
    let written = std::fs::read_to_string(path()).unwrap_or_default();
    if written == wanted {
        return;
    }
    if std::env::var_os("IOP_BLESS").is_some() {
        std::fs::write(path(), &wanted).expect("write limits.toml");
        return;
    }
    for (w, t) in written.lines().zip(wanted.lines()) {
        assert_eq!(w, t, "proto/iop/limits.toml differs from iop_proto::limits");
    }
    assert_eq!(
        written.lines().count(),
        wanted.lines().count(),
        "proto/iop/limits.toml differs from iop_proto::limits (IOP_BLESS=1 rewrites it)"
    );
}

#[test]
fn every_capped_field_is_in_the_schema() {
    let schema = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../proto/iop/control.proto"),
    )
    .expect("the schema");
    for cap in field_caps() {
        let name = cap.field.trim_start_matches("iop.");
        let name = name
            .strip_suffix(".key")
            .or_else(|| name.strip_suffix(".value"))
            .unwrap_or(name);
        let (message, field) = name.split_once('.').expect("Message.field");
        let body = schema
            .split(&format!("message {message} {{"))
            .nth(1)
            .unwrap_or_else(|| panic!("no message {message} in the schema"));
        let body = &body[..body.find("\n}").unwrap_or(body.len())];
        assert!(
            body.contains(&format!(" {field} = ")),
            "{}: no field {field} in message {message}",
            cap.field
        );
    }
}
