//! `scripts/test.sh` runs the ignored tests of iop-server's single-file test targets
//! as the ones that need nats-server, a browser or Python's protobuf: each of them must say so, or a
//! slow or broken test ignored for another reason would run there (and a tool test
//! ignored under another wording would be missed by a reader of `cargo test`).

use std::path::Path;

const REASONS: &[&str] = &[
    "#[ignore = \"needs nats-server 2.10+: scripts/test.sh runs it\"]",
    "#[ignore = \"needs nats-server 2.12+: scripts/test.sh runs it\"]",
    "#[ignore = \"needs Chromium and chromedriver: scripts/test.sh runs it\"]",
    "#[ignore = \"needs Python with protobuf and grpcio-tools: scripts/test.sh runs it\"]",
];

#[test]
fn every_ignored_test_of_a_single_file_target_needs_a_tool() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut tool_tests = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.starts_with("#[ignore") {
                assert!(
                    REASONS.contains(&line),
                    "{}:{}: {line} is not one of {REASONS:?}",
                    path.display(),
                    n + 1
                );
                tool_tests += 1;
            }
        }
    }
    assert!(tool_tests > 0, "no tool tests found in {}", dir.display());
}
