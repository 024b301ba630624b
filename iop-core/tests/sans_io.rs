//! iop-core is Sans-IO: no async runtime, socket or clock crate may enter its
//! dependency tree (clippy's `disallowed-methods` in `iop-core/clippy.toml` covers the
//! code itself).

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
fn dependency_tree_has_no_runtime_or_io_crate() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "-p",
            "iop-core",
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
    assert!(crates.contains(&"iop-core"), "unexpected tree: {tree}");
    assert!(crates.contains(&"iop-proto"), "unexpected tree: {tree}");
    for bad in FORBIDDEN {
        assert!(
            !crates.contains(bad),
            "iop-core depends on `{bad}`, which would break Sans-IO:\n{tree}"
        );
    }
}
