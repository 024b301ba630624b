//! `default-features = false` is the lean library: none of the binaries' crates
//! (flags, HTTP, config files, log output, JSON) enter iop-tokio's dependency tree
//! without the `cli` feature, and with it they do (so this test notices when the
//! feature stops gating them).

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

fn normal_deps(features: &[&str]) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "-p",
            "iop-tokio",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
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
fn without_cli_the_library_has_none_of_the_binaries_dependencies() {
    let lean = normal_deps(&["--no-default-features"]);
    assert!(
        lean.iter().any(|c| c == "tokio"),
        "unexpected tree: {lean:?}"
    );
    for cli_only in CLI_ONLY {
        assert!(
            !lean.iter().any(|c| c == cli_only),
            "iop-tokio without `cli` depends on `{cli_only}`: {lean:?}"
        );
    }
}

#[test]
fn the_cli_feature_brings_them_in() {
    let full = normal_deps(&["--features", "cli"]);
    for needed in ["clap", "axum", "toml", "tracing-subscriber"] {
        assert!(
            full.iter().any(|c| c == needed),
            "`cli` no longer pulls `{needed}`: {full:?}"
        );
    }
}
