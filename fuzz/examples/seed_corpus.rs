//! Regenerates the committed seed corpus `fuzz/corpus/<target>/` from the golden
//! vectors in `proto/iop/golden.txt`:
//!
//! ```sh
//! cargo run --manifest-path fuzz/Cargo.toml --example seed_corpus
//! ```
//!
//! Each seed is named for what it holds. The directories are emptied first, so the
//! corpus stays exactly what this program writes (a few dozen files per target).
#![allow(clippy::print_stdout)]

use std::fs;
use std::path::{Path, PathBuf};

use iop_fuzz::seeds::{self, Seed};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let golden = fs::read_to_string(root.join("../proto/iop/golden.txt"))?;
    let vectors = seeds::parse_golden(&golden)?;
    for (target, seeds) in seeds::all(&vectors) {
        let dir = root.join("corpus").join(target);
        write_dir(&dir, &seeds)?;
        println!("{target}: {} seeds in {}", seeds.len(), dir.display());
    }
    Ok(())
}

fn write_dir(dir: &PathBuf, seeds: &[Seed]) -> std::io::Result<()> {
    if dir.exists() {
        fs::remove_dir_all(dir)?;
    }
    fs::create_dir_all(dir)?;
    for seed in seeds {
        fs::write(dir.join(&seed.name), &seed.data)?;
    }
    Ok(())
}
