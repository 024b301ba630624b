//! PROTOCOL.md §4.6: "the limits are one table, shared by the encoder and the decoder of both
//! sides". The table is `iop_proto::limits`; this test fails when a crate of the
//! workspace defines a limit of its own — a `MAX_`/`MIN_`/`DEFAULT_` constant with a
//! number in it — instead of reading the table, unless it is one of the local
//! constants below, which bound no message a peer sends or receives.

use std::path::{Path, PathBuf};

/// Constants that are not wire limits, each with why.
const LOCAL: &[(&str, &str)] = &[
    ("MIN_RESERVE", "outbound buffer sizing"),
    ("MAX_U32_VARINT", "a fact of the varint encoding"),
    ("MAX_VARINT_LEN", "a fact of the varint encoding"),
    (
        "MAX_QUEUED_REQUESTS",
        "the Edge's own request queue, never on the wire",
    ),
    (
        "MAX_CANDIDATES",
        "the Edge's own request queue, never on the wire",
    ),
    (
        "DEFAULT_EVENT_CAPACITY",
        "the registry's event queue inside the Edge",
    ),
    (
        "MAX_EXTRA_PAGES",
        "requests a driver adds when paging a status",
    ),
    ("MAX_FIELD", "the decoder's field-number table"),
    (
        "MAX_LATER_UPDATES",
        "load updates a Control Plane keeps while it pages a status in",
    ),
    (
        "MAX_NAMED_SESSIONS",
        "session ids a command's undeliverable report names, never on the wire",
    ),
    ("MAX_EVENT_STREAMS", "the admin HTTP API's event streams"),
    (
        "MAX_REMOTE_EDGES",
        "other replicas' Edges a fleet keeps, between replicas",
    ),
    (
        "MAX_REMOTE_REPLICAS",
        "other replicas a fleet follows, between replicas",
    ),
    (
        "MAX_PENDING_RESERVATIONS",
        "providers' reservations a replica keeps until it publishes them, between replicas",
    ),
    (
        "MAX_PLACEMENT_LIMIT",
        "candidates one placement of the admin API lists, never on the wire",
    ),
    (
        "DEFAULT_PLACEMENT_LIMIT",
        "candidates one placement of the admin API lists, never on the wire",
    ),
    (
        "MAX_PLACEMENT_LABELS",
        "labels one placement query of the admin API requires, never on the wire",
    ),
    (
        "DEFAULT_WATCH_CHANGES",
        "the fleet's load-watch log inside the Control Plane, never on the wire",
    ),
    (
        "DEFAULT_WATCH_BYTES",
        "the fleet's load-watch log inside the Control Plane, never on the wire",
    ),
    (
        "MAX_JOB_EDGES",
        "the Edges one fleet-wide job plans for, inside the Control Plane",
    ),
    ("MAX_PAGE", "a page of a job's Edges in the admin HTTP API"),
    (
        "MAX_GROUPS",
        "model and label groups a replica's share of the fleet's load adds, between replicas only",
    ),
    (
        "MAX_FILTER_TEXT",
        "the text of a fleet listing's filter one replica takes from another, between replicas only",
    ),
    (
        "MAX_LOAD_SAMPLES",
        "the samples of the fleet's load a Control Plane keeps, never on the wire",
    ),
    (
        "MAX_USE",
        "a provider's use in a sample of an Edge's load history",
    ),
    ("MAX_BODY", "the admin HTTP API's request bodies"),
    (
        "MAX_EDGE_PAGE",
        "a page of the admin HTTP API's list of Edges",
    ),
    (
        "DEFAULT_METRICS_MAX_SERIES",
        "the per-Edge and per-provider series /metrics shows",
    ),
    ("MAX_ANSWER", "the admin API's answers as iopctl reads them"),
    (
        "MAX_EVENT",
        "the admin API's event stream as iopctl reads it",
    ),
    (
        "DEFAULT_CANCEL_GRACE",
        "how long a cancelled handler has to return, inside the Edge",
    ),
    (
        "MIN_TOKEN_LEN",
        "the admin HTTP API's token file and the Edge config's node tokens",
    ),
    (
        "MIN_CREDENTIAL_LEN",
        "the Edge binary's refusal of a guessable credential file",
    ),
    (
        "MIN_SAMPLE",
        "the shortest window the CP's acceptance rate is read over",
    ),
    (
        "MIN_COUNT",
        "the fewest acceptances the CP's acceptance rate is read from",
    ),
    (
        "MAX_REFUSAL_HANDSHAKES",
        "a driver's TLS refusals under way",
    ),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `(file, line, name)` of every limit-like constant defined with a number.
fn limit_constants(root: &Path) -> Vec<(String, usize, String)> {
    let mut files = Vec::new();
    for krate in [
        "iop-proto",
        "iop-core",
        "iop-fleet",
        "iop-driver",
        "iop-tokio",
        "iop-server",
        "iop-smol",
    ] {
        rust_files(&root.join(krate).join("src"), &mut files);
    }
    let table = root.join("iop-proto/src/limits");
    let mut found = Vec::new();
    for file in files.iter().filter(|f| !f.starts_with(&table)) {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let Some(at) = line.find("const ") else {
                continue;
            };
            if line.trim_start().starts_with("//") {
                continue;
            }
            let rest = &line[at + "const ".len()..];
            let Some((name, value)) = rest.split_once(':').and_then(|(name, rest)| {
                rest.split_once('=').map(|(_, value)| (name.trim(), value))
            }) else {
                continue;
            };
            let limit_like = ["MAX_", "MIN_", "DEFAULT_"]
                .iter()
                .any(|p| name.starts_with(p));
            if limit_like && value.chars().any(|c| c.is_ascii_digit()) {
                let rel = file.strip_prefix(root).unwrap().display().to_string();
                found.push((rel, n + 1, name.to_owned()));
            }
        }
    }
    found
}

#[test]
fn every_limit_is_read_from_the_one_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let found = limit_constants(root);
    let strays: Vec<String> = found
        .iter()
        .filter(|(_, _, name)| !LOCAL.iter().any(|(local, _)| local == name))
        .map(|(file, line, name)| format!("{file}:{line}: {name}"))
        .collect();
    assert!(
        strays.is_empty(),
        "limits defined outside iop_proto::limits (read the table instead, or list a \
         constant that bounds nothing on the wire in LOCAL):\n{}",
        strays.join("\n")
    );
    // The scan sees what it is meant to: every local constant is still there.
    for (local, _) in LOCAL {
        assert!(
            found.iter().any(|(_, _, name)| name == local),
            "{local} is gone: remove it from LOCAL"
        );
    }
}
