//! The crate docs' "Where each rule lives" table names real files: a file moved or
//! renamed without the table fails here, so a newcomer following it never lands on
//! nothing.

use std::path::Path;

/// The backquoted `*.rs` paths in the table's rows.
fn table_paths(docs: &str) -> Vec<String> {
    let start = docs
        .find("# Where each rule lives")
        .expect("the crate docs have the rule table");
    docs[start..]
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("//!"))
        .filter(|l| l.starts_with("//! | §"))
        .flat_map(|l| l.split('`').skip(1).step_by(2).map(str::to_owned))
        .filter(|p| p.ends_with(".rs"))
        .collect()
}

#[test]
fn every_file_the_rule_table_names_exists() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = crate_dir.parent().expect("the workspace root");
    let docs = std::fs::read_to_string(crate_dir.join("src/lib.rs")).unwrap();
    let paths = table_paths(&docs);
    assert!(paths.len() >= 30, "the table names {} files", paths.len());
    let missing: Vec<&String> = paths.iter().filter(|p| !root.join(p).is_file()).collect();
    assert!(
        missing.is_empty(),
        "named in the rule table but absent: {missing:?}"
    );
}

#[test]
fn every_rule_file_of_either_end_is_in_the_table() {
    // The files that hold protocol rules, one concept each; a new one must say
    // which rule it holds. Not rules: the modules' roots, their events, timers and
    // configuration, the Edge's secret type and registry trait, and the Control
    // Plane's transport inputs, which only dispatch.
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let docs = std::fs::read_to_string(crate_dir.join("src/lib.rs")).unwrap();
    let paths = table_paths(&docs);
    let not_rules = [
        "mod.rs",
        "event.rs",
        "timer.rs",
        "config.rs",
        "secret.rs",
        "registry_seam.rs",
        "input.rs",
    ];
    for dir in [
        "src/edge",
        "src/cp/session",
        "src/cp/control_plane",
        "src/cp/control_plane/commands",
    ] {
        for entry in std::fs::read_dir(crate_dir.join(dir)).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if !name.ends_with(".rs") || not_rules.contains(&name.as_str()) {
                continue;
            }
            let path = format!("iop-core/{dir}/{name}");
            assert!(paths.contains(&path), "{path} is not in the rule table");
        }
    }
}
