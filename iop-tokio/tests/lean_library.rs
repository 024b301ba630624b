//! iop-tokio is the lean library: none of the reference binaries' crates (flags, HTTP,
//! config files, log output, JSON) enter its dependency tree, whatever its features;
//! they enter iop-server's (so this test notices when the list stops naming what the
//! binaries use).

use std::process::Command;

/// Crates only the reference binaries need.
const CLI_ONLY: &[&str] = &[
    "clap",
    "axum",
    "hyper",
    "toml",
    "serde",
    "serde_json",
    "tracing-subscriber",
    "pbjson",
];

fn normal_deps(package: &str, features: &[&str]) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["tree", "-p", package, "-e", "normal", "--prefix", "none"])
        .args(["--format", "{p}", "--offline"])
        .args(features)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn the_library_has_none_of_the_binaries_dependencies() {
    let lean = normal_deps("iop-tokio", &["--all-features"]);
    assert!(
        lean.iter().any(|c| c == "tokio"),
        "unexpected tree: {lean:?}"
    );
    for cli_only in CLI_ONLY {
        assert!(
            !lean.iter().any(|c| c == cli_only),
            "iop-tokio depends on `{cli_only}`: {lean:?}"
        );
    }
}

#[test]
fn the_server_crate_brings_them_in() {
    let full = normal_deps("iop-server", &[]);
    for needed in CLI_ONLY {
        assert!(
            full.iter().any(|c| c == needed),
            "iop-server no longer pulls `{needed}`: {full:?}"
        );
    }
}
