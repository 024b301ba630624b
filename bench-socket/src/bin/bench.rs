//! Every socket-level benchmark of BENCHMARKS.md §4–§6, one after the other, with
//! their default arguments: `roundtrip`, `edge_floor`, `codec_floor`, `idle_memory`,
//! `scale`, then
//! `rt_instructions` when valgrind is installed. Each is a sibling binary run as its
//! own process (so one's sockets, threads and heap never touch the next one's) and
//! prints its own Markdown table; this one stops at the first that fails.
//!
//! ```text
//! cargo build --release --manifest-path bench-socket/Cargo.toml --bins
//! cargo run --release --manifest-path bench-socket/Cargo.toml --bin bench
//! ```
//!
//! About 2–3 minutes on a 2-core machine (first build of this package: ~5 minutes).
#![forbid(unsafe_code)]
#![allow(clippy::print_stdout)]

use std::process::Command;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), BoxError> {
    let here = std::env::current_exe()?;
    let valgrind = Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let mut benches = vec![
        "roundtrip",
        "edge_floor",
        "codec_floor",
        "idle_memory",
        "scale",
    ];
    if valgrind {
        benches.push("rt_instructions");
    }
    for bench in benches {
        let path = here.with_file_name(bench);
        if !path.exists() {
            return Err(format!(
                "{} is missing: build every bin first (cargo build --release \
                 --manifest-path bench-socket/Cargo.toml --bins)",
                path.display()
            )
            .into());
        }
        println!("\n## `{bench}`\n");
        let status = Command::new(&path).status()?;
        if !status.success() {
            return Err(format!("{bench} failed: {status}").into());
        }
    }
    if !valgrind {
        println!("\n(`rt_instructions` skipped: valgrind is not installed.)");
    }
    Ok(())
}
