//! The modules of the Control Plane (`iop-core/src/cp`, every folder under it) and of
//! the driver (`iop-driver/src`, every folder under it) read in one direction: no
//! module imports a sibling that imports it back, directly or through others — by a
//! `use`, a path in code, or a doc link. A circle means two concepts were not told
//! apart; this test names it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The modules of `dir`: its `.rs` files other than `mod.rs`, and its folders that
/// hold a `mod.rs` (each a module of its own, read as one).
fn modules(dir: &Path) -> BTreeMap<String, String> {
    let mut modules = BTreeMap::new();
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let text = if path.is_dir() && path.join("mod.rs").exists() {
            let mut all = String::new();
            for file in rust_files(&path) {
                all.push_str(&std::fs::read_to_string(file).unwrap_or_default());
            }
            all
        } else if path.extension().is_some_and(|e| e == "rs") && stem != "mod" {
            std::fs::read_to_string(&path).unwrap_or_default()
        } else {
            continue;
        };
        modules.insert(stem.to_owned(), text);
    }
    modules
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// The names a path prefix (`super`, `crate::cp`) reaches in `text`: `prefix::name`,
/// and every first name inside `prefix::{a, b::c}`. Doc links count: an import only
/// the docs see still ties the two modules' meanings together.
fn reached(text: &str, prefix: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let needle = format!("{prefix}::");
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    for (at, _) in text.match_indices(&needle) {
        // `crate::cp::x` also reads as `cp::x`; only whole prefixes count.
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &text[at + needle.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        names.insert(ident(item.trim()));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            names.insert(ident(item.trim()));
        } else {
            names.insert(ident(rest));
        }
    }
    names
}

/// The sibling modules each module of `dir` (the module `crate_path`) reaches, as
/// `super::<module>` or by its path from the crate (`mod.rs` is the parent, not a
/// sibling).
fn sibling_imports(dir: &Path, crate_path: &str) -> BTreeMap<String, BTreeSet<String>> {
    let files = modules(dir);
    let names: BTreeSet<String> = files.keys().cloned().collect();
    files
        .iter()
        .map(|(name, text)| {
            let mut used = reached(text, "super");
            used.extend(reached(text, crate_path));
            let used = used
                .into_iter()
                .filter(|other| other != name && names.contains(other))
                .collect();
            (name.clone(), used)
        })
        .collect()
}

/// Every folder of modules under `dir` (itself included), with its path from the
/// crate (`crate_path` for `dir`).
fn module_dirs(dir: &Path, crate_path: &str) -> Vec<(PathBuf, String)> {
    let mut out = vec![(dir.to_path_buf(), crate_path.to_owned())];
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() && path.join("mod.rs").exists() {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            out.extend(module_dirs(&path, &format!("{crate_path}::{name}")));
        }
    }
    out
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
fn the_modules_of_the_control_plane_and_the_driver_import_each_other_in_no_circle() {
    let root = workspace();
    let mut checked = 0;
    for (top, crate_path) in [
        ("iop-core/src/cp", "crate::cp"),
        ("iop-driver/src", "crate"),
    ] {
        for (dir, path) in module_dirs(&root.join(top), crate_path) {
            let graph = sibling_imports(&dir, &path);
            checked += graph.len();
            if let Some(found) = circle(&graph) {
                panic!(
                    "{}: the modules import each other in a circle: {}",
                    dir.display(),
                    found.join(" → ")
                );
            }
        }
    }
    assert!(checked > 80, "only {checked} modules found");
}

#[test]
fn a_grouped_import_and_a_doc_link_are_imports() {
    let text = "use super::{alpha, beta::{B, C}};\n/// [`X`](super::gamma::X)\nfn f(){ crate::cp::delta::g() }";
    let mut names = reached(text, "super");
    assert_eq!(
        names.iter().map(String::as_str).collect::<Vec<_>>(),
        ["alpha", "beta", "gamma"]
    );
    names = reached(text, "crate::cp");
    assert!(names.contains("delta"));
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
