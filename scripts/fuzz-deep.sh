#!/usr/bin/env bash
# Deeper fuzzing campaigns than CI's short runs: every target (or the ones named)
# for a fixed time each, with AddressSanitizer on nightly. See fuzz/README.md.
#
#   scripts/fuzz-deep.sh                 # every target, 10 minutes each
#   scripts/fuzz-deep.sh 30              # every target, 30 minutes each
#   scripts/fuzz-deep.sh 5 frame_decode  # one target, 5 minutes
#   FUZZ_MINUTES=60 scripts/fuzz-deep.sh
#
# The corpus grows in fuzz/target/deep-corpus/<target> (not committed), seeded from
# fuzz/corpus/<target>. Crashes land in fuzz/artifacts/<target>/; replay one with
# `cargo +nightly fuzz run <target> <file>`, then turn it into a #[test].
set -euo pipefail
cd "$(dirname "$0")/.."

minutes="${1:-${FUZZ_MINUTES:-10}}"
shift || true
if ! [[ "$minutes" =~ ^[0-9]+$ ]] || [ "$minutes" -eq 0 ]; then
    echo "usage: $0 [minutes per target] [target...]" >&2
    exit 2
fi
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz-deep needs a nightly toolchain (rustup toolchain install nightly)" >&2
    exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo +nightly fuzz list)
fi

cargo +nightly fuzz build --sanitizer address
for target in "${targets[@]}"; do
    work="fuzz/target/deep-corpus/$target"
    mkdir -p "$work"
    echo "== $target: $minutes min (corpus: $work)"
    cargo +nightly fuzz run --sanitizer address "$target" "$work" "fuzz/corpus/$target" -- \
        -max_total_time=$((minutes * 60)) -dict=fuzz/iop.dict -print_final_stats=1
done
echo "== done; to shrink a grown corpus: cargo +nightly fuzz cmin <target> $PWD/fuzz/target/deep-corpus/<target>"
