//! `PROTOCOL.md` and the code say the same: its limits table is `iop_proto::limits::
//! TABLE` row for row, the sizes it quotes are the computed ones, and every
//! `PROTOCOL.md §n` reference in the repository names a section it has, and none
//! cites the normative source the document was written from instead.
//!
//! After changing the limits table, `IOP_BLESS=1 cargo test -p iop-tests --test
//! protocol_doc` rewrites the table in `PROTOCOL.md`; review the diff.

use std::path::{Path, PathBuf};

use iop_driver::iop_core::proto::limits;

const BEGIN: &str = "<!-- limits:begin -->\n";
const END: &str = "<!-- limits:end -->";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn protocol() -> String {
    std::fs::read_to_string(root().join("PROTOCOL.md")).unwrap()
}

/// The table as `PROTOCOL.md` must write it.
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

#[test]
fn the_limits_table_is_the_codes() {
    let doc = protocol();
    let start = doc.find(BEGIN).expect("limits:begin marker") + BEGIN.len();
    let end = doc.find(END).expect("limits:end marker");
    let written = &doc[start..end];
    let wanted = rendered_table();
    if written == wanted {
        return;
    }
    if std::env::var_os("IOP_BLESS").is_some() {
        let updated = format!("{}{}{}", &doc[..start], wanted, &doc[end..]);
        std::fs::write(root().join("PROTOCOL.md"), updated).unwrap();
        return;
    }
    for (w, t) in written.lines().zip(wanted.lines()) {
        assert_eq!(w, t, "PROTOCOL.md §7 differs from iop_proto::limits::TABLE");
    }
    assert_eq!(
        written.lines().count(),
        wanted.lines().count(),
        "PROTOCOL.md §7 has a different number of rows than iop_proto::limits::TABLE"
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
