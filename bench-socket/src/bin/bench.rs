//! Every socket-level benchmark of BENCHMARKS.md, one after the other, with their
//! default arguments: `roundtrip`, `floors`, `idle_memory`, `scale`. Each is a
//! sibling binary run as its
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
    for bench in ["roundtrip", "floors", "idle_memory", "scale"] {
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
    Ok(())
}
