#!/usr/bin/env bash
# What a newcomer writes from README.md alone, built and run as a crate outside the
# workspace: README's dependency block as its Cargo.toml, the iop-tokio crate
# documentation's example as src/main.rs and iop-tokio/examples/embed.rs as an
# example. Fails if either needs anything the block does not list.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

deps=$(awk '/^## Use it as a library/ {on = 1} on && /^```toml/ {block = 1; next}
            block && /^```/ {exit} block' "$root/README.md")
[[ "$deps" == *"[dependencies]"* ]] || { echo "no dependency block in README.md" >&2; exit 1; }
# The published crate, here from this checkout.
deps=${deps/iop-tokio = \{ /iop-tokio = \{ path = \"$root/iop-tokio\", }

mkdir -p "$dir/src" "$dir/examples"
cat > "$dir/Cargo.toml" <<TOML
[package]
name = "newcomer"
version = "0.0.0"
edition = "2024"
publish = false

[workspace]

$deps
TOML
# The crate docs' first example: `//! ` stripped, hidden `# ` lines shown.
awk '/^\/\/! ```/ {n++; next} n == 1 {sub(/^\/\/! ?/, ""); sub(/^# /, ""); sub(/^#$/, ""); print} n >= 2 {exit}' \
    "$root/iop-tokio/src/lib.rs" > "$dir/src/main.rs"
grep -q "fn main" "$dir/src/main.rs" || { echo "no example in iop-tokio's crate docs" >&2; exit 1; }
cp "$root/iop-tokio/examples/embed.rs" "$dir/examples/embed.rs"
# The workspace's lock, so the crate builds with the versions tested here.
cp "$root/Cargo.lock" "$dir/Cargo.lock"

# Beside the workspace's own build (CARGO_TARGET_DIR, a cargo config's target-dir, or target/).
target_dir="$(cd "$root" && cargo metadata --format-version 1 --no-deps --locked |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
export CARGO_TARGET_DIR="$target_dir/newcomer"
cd "$dir"
cargo run --quiet
cargo run --quiet --example embed
echo "newcomer: the README's dependencies build and run the crate example and embed.rs"
