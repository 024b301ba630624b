//! The Control Plane's modules read in one direction: no file of `iop-core/src/cp`,
//! of its `session` or `control_plane`, or of `iop-driver/src/cp` imports a sibling that
//! imports it back, directly or through others. A circle means two concepts were not
//! told apart; this test names it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The sibling modules each file of `dir` (the module `crate_path`) names, as
/// `super::<module>::` or by its path from the crate (`mod.rs` is the parent, not a
/// sibling). An import only the docs see (`#[cfg(doc)]`) is no dependency.
fn sibling_imports(dir: &Path, crate_path: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = BTreeMap::new();
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().is_none_or(|e| e != "rs") || stem == "mod" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let mut code = String::new();
        let mut doc_only = false;
        for line in text.lines() {
            if !std::mem::replace(&mut doc_only, line.trim() == "#[cfg(doc)]") {
                code.push_str(line);
                code.push('\n');
            }
        }
        files.insert(stem.to_owned(), code);
    }
    let names: BTreeSet<String> = files.keys().cloned().collect();
    files
        .iter()
        .map(|(name, text)| {
            let used = names
                .iter()
                .filter(|other| {
                    *other != name
                        && (text.contains(&format!("super::{other}::"))
                            || text.contains(&format!("{crate_path}::{other}::")))
                })
                .cloned()
                .collect();
            (name.clone(), used)
        })
        .collect()
}

/// A circle among `graph`'s modules, if there is one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        graph: &BTreeMap<String, BTreeSet<String>>,
        node: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_owned());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(graph, next, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(graph, node, &mut Vec::new(), &mut done))
}

#[test]
fn the_control_planes_modules_import_each_other_in_no_circle() {
    let root = workspace();
    for (dir, crate_path) in [
        ("iop-core/src/cp", "crate::cp"),
        ("iop-core/src/cp/session", "crate::cp::session"),
        ("iop-core/src/cp/control_plane", "crate::cp::control_plane"),
        ("iop-driver/src/cp", "crate::cp"),
    ] {
        let graph = sibling_imports(&root.join(dir), crate_path);
        assert!(graph.len() > 3, "{dir}: too few modules found");
        if let Some(found) = circle(&graph) {
            panic!(
                "{dir}: the modules import each other in a circle: {}",
                found.join(" → ")
            );
        }
    }
}

#[test]
fn a_circle_is_found() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(
        circle(&graph),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    let mut acyclic = graph.clone();
    acyclic.insert("c".into(), BTreeSet::new());
    assert_eq!(circle(&acyclic), None);
}
