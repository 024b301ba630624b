//! iop-core and iop-fleet are Sans-IO: no async runtime, socket or clock crate may
//! enter their dependency trees (clippy's `disallowed-methods` in each crate's
//! `clippy.toml` covers the code itself).

use std::process::Command;

const FORBIDDEN: &[&str] = &[
    "tokio",
    "smol",
    "async-io",
    "async-std",
    "async-executor",
    "futures-io",
    "mio",
    "polling",
];

#[test]
fn iop_core_depends_on_no_runtime_or_io_crate() {
    no_runtime_or_io_crate("iop-core");
}

#[test]
fn iop_fleet_depends_on_no_runtime_or_io_crate() {
    no_runtime_or_io_crate("iop-fleet");
}

fn no_runtime_or_io_crate(package: &str) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "-p",
            package,
            "-e",
            "normal,build",
            "--prefix",
            "none",
            "--format",
            "{p}",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8(out.stdout).expect("utf-8");
    let crates: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(crates.contains(&package), "unexpected tree: {tree}");
    assert!(crates.contains(&"iop-proto"), "unexpected tree: {tree}");
    for bad in FORBIDDEN {
        assert!(
            !crates.contains(bad),
            "{package} depends on `{bad}`, which would break Sans-IO:\n{tree}"
        );
    }
}
