//! `PROTOCOL.md` and the code say the same: its limits table is `iop_proto::limits::
//! TABLE` row for row, the sizes it quotes are the computed ones, and every
//! `PROTOCOL.md §n` reference in the repository names a section it has, and none
//! cites the normative source the document was written from instead.
//!
//! So are its two tables of checks (§11), `iop_proto::checks`.
//!
//! After changing the limits table or the checks, `IOP_BLESS=1 cargo test -p iop-tests
//! --test protocol_doc` rewrites the tables in `PROTOCOL.md`; review the diff.

use std::path::{Path, PathBuf};

use iop_driver::iop_core::proto::limits;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn protocol() -> String {
    std::fs::read_to_string(root().join("PROTOCOL.md")).unwrap()
}

/// The limits table as `PROTOCOL.md` must write it.
fn rendered_table() -> String {
    let mut out = String::from("| constant | value | what |\n|---|---:|---|\n");
    for row in limits::TABLE {
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            row.name, row.value, row.what
        ));
    }
    out
}

/// Checks that the block between `<!-- {marker}:begin -->` and `<!-- {marker}:end -->`
/// is `wanted`, or writes it there under `IOP_BLESS`.
fn block_is(marker: &str, wanted: &str, source: &str) {
    let (begin, end) = (
        format!("<!-- {marker}:begin -->\n"),
        format!("<!-- {marker}:end -->"),
    );
    let doc = protocol();
    let start = doc.find(&begin).unwrap_or_else(|| panic!("{begin} marker")) + begin.len();
    let stop = doc.find(&end).unwrap_or_else(|| panic!("{end} marker"));
    let written = &doc[start..stop];
    if written == wanted {
        return;
    }
    if std::env::var_os("IOP_BLESS").is_some() {
        let updated = format!("{}{}{}", &doc[..start], wanted, &doc[stop..]);
        std::fs::write(root().join("PROTOCOL.md"), updated).unwrap();
        return;
    }
    for (w, t) in written.lines().zip(wanted.lines()) {
        assert_eq!(w, t, "PROTOCOL.md's {marker} table differs from {source}");
    }
    assert_eq!(
        written.lines().count(),
        wanted.lines().count(),
        "PROTOCOL.md's {marker} table has a different number of rows than {source}"
    );
}

#[test]
fn the_limits_table_is_the_codes() {
    block_is("limits", &rendered_table(), "iop_proto::limits::TABLE");
}

#[test]
fn the_check_tables_are_the_codes() {
    use iop_driver::iop_core::proto::checks;
    block_is(
        "checks-cp",
        &checks::table(checks::CONTROL_PLANE),
        "iop_proto::checks::CONTROL_PLANE",
    );
    block_is(
        "checks-edge",
        &checks::table(checks::EDGE),
        "iop_proto::checks::EDGE",
    );
}

/// `211875` as the document writes it: `211 875`.
fn spaced(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

#[test]
fn the_sizes_it_quotes_are_the_computed_ones() {
    let doc = protocol();
    for (what, n) in [
        ("largest legal hello", limits::MAX_HELLO_LEN),
        (
            "largest Control Plane frame",
            limits::MAX_CONTROL_PLANE_FRAME_LEN,
        ),
    ] {
        let written = format!("{} bytes", spaced(n));
        assert!(
            doc.contains(&written),
            "PROTOCOL.md should quote the {what} as {written}"
        );
    }
}

/// The section numbers `PROTOCOL.md` has: `4`, `4.1`, ... from its headings.
fn sections(doc: &str) -> Vec<String> {
    doc.lines()
        .filter_map(|l| l.strip_prefix("## ").or_else(|| l.strip_prefix("### ")))
        .filter_map(|h| {
            h.split_once(". ")
                .map(|(n, _)| n)
                .or(h.split_once(' ').map(|(n, _)| n))
        })
        .filter(|n| n.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .map(|n| n.trim_end_matches('.').to_owned())
        .collect()
}

fn project_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" && name != "corpus" && name != "artifacts"
            {
                project_files(&path, out);
            }
        } else if ["rs", "md", "proto", "toml", "sh", "json"]
            .iter()
            .any(|e| name.ends_with(&format!(".{e}")))
        {
            out.push(path);
        }
    }
}

#[test]
fn every_reference_names_a_section_it_has_and_none_names_the_spec() {
    let doc = protocol();
    let have = sections(&doc);
    assert!(have.iter().any(|s| s == "4.6"), "sections read: {have:?}");
    let mut files = Vec::new();
    project_files(&root(), &mut files);
    let mut bad = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let shown = file
            .strip_prefix(root())
            .unwrap_or(&file)
            .display()
            .to_string();
        for (i, line) in text.lines().enumerate() {
            if line.contains(concat!("SPEC", " §")) || line.contains(concat!("SPEC", ".md §")) {
                bad.push(format!(
                    "{shown}:{}: cites the SPEC, not PROTOCOL.md",
                    i + 1
                ));
            }
            let mut rest = line;
            while let Some(at) = rest.find("PROTOCOL.md §") {
                rest = &rest[at + "PROTOCOL.md §".len()..];
                let number: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.')
                    .collect();
                let number = number.trim_end_matches('.');
                if number.is_empty() {
                    continue; // prose: "PROTOCOL.md §n"
                }
                // `§4.1.2` is item 2 of §4.1: its section must exist.
                let known = |n: &str| have.iter().any(|s| s == n);
                let section_of_item = number.rsplit_once('.').is_some_and(|(s, _)| known(s));
                if !(known(number) || section_of_item) {
                    bad.push(format!(
                        "{shown}:{}: §{number} is not a section of PROTOCOL.md",
                        i + 1
                    ));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
